use crate::rendering::{RenderRequest, RenderedMessage};

/// Renders templates outside any transaction, with the bounds of the delivery path: the
/// server renders in `mailroom render-sandbox` children whose address space is capped;
/// tests that embed the application render in-process ([`InProcessRenderer`]).
///
/// Used by previews, so a preview renders exactly as a send would and a hostile template
/// can kill only a render child, never the HTTP server.
pub trait TemplateRenderer: Send + Sync {
    /// Renders `request` (blocking).
    ///
    /// # Errors
    /// `Some(reason)` naming the field (and line, when known) when the template does not
    /// render; `None` when no renderer could run (no render child could be started).
    fn render(&self, request: &RenderRequest) -> Result<RenderedMessage, Option<String>>;
}

/// Renders in the calling process: bounded in time (fuel) and output, not in memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcessRenderer;

impl TemplateRenderer for InProcessRenderer {
    fn render(&self, request: &RenderRequest) -> Result<RenderedMessage, Option<String>> {
        request.render().map_err(|error| Some(error.to_string()))
    }
}
