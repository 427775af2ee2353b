// The console's visual editor for `wysiwyg` templates: headings, bold, italic, links,
// lists and images by URL, over the browser's own editing (contenteditable). It stores
// HTML: every change is copied into the form's textarea, which is what the form sends,
// so without this script the textarea is a plain HTML field and the form still works.
// Served from the binary like htmx (script-src 'self'); no inline script or style.
(function () {
  "use strict";

  function button(label, title, action) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "tool";
    b.textContent = label;
    // The visible text is the accessible name; the title only adds a hint.
    b.title = title;
    b.addEventListener("click", action);
    return b;
  }

  // A template's HTML is written by any member of the account, and the editing area sits
  // in a console page, inside the form that carries the session's CSRF token: it must not
  // be able to act as the person who opens it. So it is parsed inert (DOMParser runs no
  // script and loads nothing), and what could act is dropped before it is shown: active
  // and form elements, event handlers, htmx attributes (htmx would otherwise send the
  // surrounding form, token and all, wherever they say), and javascript: URLs. The area
  // also carries `hx-disable`, so htmx processes nothing inside it, whatever gets in.
  var DROPPED_ELEMENTS = "script, iframe, frame, frameset, object, embed, applet, form, " +
    "input, button, select, textarea, option, base, meta, link, portal, template";
  function cleaned(html) {
    var parsed = new DOMParser().parseFromString(html, "text/html");
    var dropped = parsed.body.querySelectorAll(DROPPED_ELEMENTS);
    for (var i = 0; i < dropped.length; i++) {
      dropped[i].remove();
    }
    var all = parsed.body.querySelectorAll("*");
    for (var j = 0; j < all.length; j++) {
      var attributes = Array.prototype.slice.call(all[j].attributes);
      for (var k = 0; k < attributes.length; k++) {
        var name = attributes[k].name.toLowerCase();
        var value = attributes[k].value.replace(/[\s\u0000-\u001f]/g, "").toLowerCase();
        if (name.indexOf("on") === 0 || name.indexOf("hx-") === 0 ||
            name.indexOf("data-hx-") === 0 || name.indexOf("form") === 0 ||
            value.indexOf("javascript:") === 0 || value.indexOf("vbscript:") === 0) {
          all[j].removeAttribute(attributes[k].name);
        }
      }
    }
    return parsed.body.innerHTML;
  }

  function attach(textarea) {
    var wrap = document.createElement("div");
    wrap.className = "editor";
    var toolbar = document.createElement("div");
    toolbar.className = "toolbar";
    toolbar.setAttribute("role", "toolbar");
    toolbar.setAttribute("aria-label", "Formatting");
    var area = document.createElement("div");
    area.className = "editable";
    area.setAttribute("hx-disable", "");
    area.contentEditable = "true";
    area.setAttribute("role", "textbox");
    area.setAttribute("aria-multiline", "true");
    area.setAttribute("aria-label", "Content (visual editor)");
    area.innerHTML = cleaned(textarea.value);
    var urlId = textarea.id + "-url";
    var urlLabel = document.createElement("label");
    urlLabel.htmlFor = urlId;
    urlLabel.className = "inline";
    urlLabel.textContent = "URL for links and images";
    var url = document.createElement("input");
    url.type = "text";
    url.id = urlId;
    url.className = "tool-url";
    url.placeholder = "https://";

    function copy() {
      textarea.value = area.innerHTML;
    }
    function sync() {
      copy();
      // A toolbar command changes the text without typing: say that the form changed
      // (for the live preview). Not on submit, which would post again and again.
      document.dispatchEvent(new CustomEvent("mailroom:edited"));
    }
    // The toolbar's fields take the focus (and the selection) from the text: the last
    // selection inside the text is kept and put back before a command runs.
    var saved = null;
    document.addEventListener("selectionchange", function () {
      var selection = document.getSelection();
      if (selection.rangeCount && area.contains(selection.getRangeAt(0).commonAncestorContainer)) {
        saved = selection.getRangeAt(0).cloneRange();
      }
    });
    function run(command, value) {
      area.focus();
      if (saved) {
        var selection = document.getSelection();
        selection.removeAllRanges();
        selection.addRange(saved);
      }
      document.execCommand(command, false, value);
      sync();
    }
    function withUrl(command) {
      var value = url.value.trim();
      if (!/^https?:\/\//i.test(value)) {
        url.focus();
        url.setAttribute("aria-invalid", "true");
        return;
      }
      url.removeAttribute("aria-invalid");
      run(command, value);
    }

    var altId = textarea.id + "-alt";
    var altLabel = document.createElement("label");
    altLabel.htmlFor = altId;
    altLabel.className = "inline";
    altLabel.textContent = "Image description";
    var alt = document.createElement("input");
    alt.type = "text";
    alt.id = altId;
    alt.className = "tool-url";

    toolbar.appendChild(button("Heading", "Heading", function () { run("formatBlock", "h2"); }));
    toolbar.appendChild(button("Paragraph", "Paragraph", function () { run("formatBlock", "p"); }));
    toolbar.appendChild(button("Bold", "Bold", function () { run("bold"); }));
    toolbar.appendChild(button("Italic", "Italic", function () { run("italic"); }));
    toolbar.appendChild(button("Bulleted list", "Bulleted list", function () { run("insertUnorderedList"); }));
    toolbar.appendChild(button("Numbered list", "Numbered list", function () { run("insertOrderedList"); }));
    toolbar.appendChild(urlLabel);
    toolbar.appendChild(url);
    toolbar.appendChild(button("Link", "Link the selection to the URL", function () { withUrl("createLink"); }));
    toolbar.appendChild(altLabel);
    toolbar.appendChild(alt);
    toolbar.appendChild(button("Image", "Insert the image at the URL", function () {
      withUrl("insertImage");
      // Every image gets a text alternative (empty marks it decorative).
      var images = area.querySelectorAll("img:not([alt])");
      for (var i = 0; i < images.length; i++) {
        images[i].setAttribute("alt", alt.value.trim());
      }
      sync();
    }));

    area.addEventListener("input", sync);
    if (textarea.form) {
      textarea.form.addEventListener("submit", copy);
    }
    wrap.appendChild(toolbar);
    wrap.appendChild(area);
    textarea.parentNode.insertBefore(wrap, textarea);
    // The HTML stays reachable under a disclosure for what the toolbar cannot do.
    textarea.hidden = true;
    textarea.addEventListener("input", function () { area.innerHTML = cleaned(textarea.value); });
    var show = button("Edit the HTML", "Show or hide the HTML source", function () {
      sync();
      textarea.hidden = !textarea.hidden;
    });
    show.className = "tool secondary-tool";
    wrap.appendChild(show);
  }

  function start() {
    // Strict CSP: paragraphs, not styled divs, for new lines.
    try {
      document.execCommand("defaultParagraphSeparator", false, "p");
      // Tags, not style attributes: mail clients and the strict policy both prefer them.
      document.execCommand("styleWithCSS", false, false);
    } catch (e) { /* older browsers */ }
    var fields = document.querySelectorAll("textarea[data-wysiwyg]");
    for (var i = 0; i < fields.length; i++) {
      attach(fields[i]);
    }
    // Choosing the visual editor opens it at once, on a new template too.
    var type = document.getElementById("template-type");
    var content = document.getElementById("template-content");
    if (type && content) {
      type.addEventListener("change", function () {
        if (type.value === "wysiwyg" && !content.hasAttribute("data-wysiwyg")) {
          content.setAttribute("data-wysiwyg", "");
          attach(content);
        }
      });
    }
    livePreview();
  }

  // The preview follows the form: a change, then a pause, and the form is posted to the
  // preview frame by its "Preview without saving" button (which names the frame).
  function livePreview() {
    var trigger = document.querySelector("button[data-live-preview]");
    if (!trigger || !trigger.form || !trigger.form.requestSubmit) {
      return;
    }
    var form = trigger.form;
    var timer = null;
    function later() {
      clearTimeout(timer);
      timer = setTimeout(function () { form.requestSubmit(trigger); }, 700);
    }
    form.addEventListener("input", later);
    form.addEventListener("change", later);
    document.addEventListener("mailroom:edited", later);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
