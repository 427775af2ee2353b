//! Subscribe forms: an account's public sign-up forms with optional double opt-in
//! (docs/api-decisions.md, "Subscribe forms and double opt-in"). [`manage`] is the API's
//! view of an account's forms; [`public`] is what the hosted page, a post and the
//! confirmation link do; [`token`] signs the page's time token and the confirmation link.

mod manage;
pub mod public;
pub mod token;

pub use manage::{count_forms, create_form, delete_form, get_form, list_forms, update_form};
pub use public::{
    confirm, confirmation_page, confirmation_redirect, form_page, submit_form, ConfirmationState,
    FormAnswer, FormPage, FormView, PostOrigin, CONFIRMATION_LIFETIME, MAX_CONFIRMATIONS_PER_DAY,
    MIN_SECONDS_AFTER_PAGE,
};
