//! Mail servers: list, count, get, create, update, delete. Saving checks the settings
//! against the live server first (outside any transaction) and stores the password sealed.

mod count_mail_servers;
mod delete_mail_server;
mod get_mail_server;
mod list_mail_servers;
mod save_mail_server;

pub use count_mail_servers::count_mail_servers;
pub use delete_mail_server::delete_mail_server;
pub use get_mail_server::get_mail_server;
pub use list_mail_servers::list_mail_servers;
pub(crate) use save_mail_server::connection_security;
pub use save_mail_server::{create_mail_server, update_mail_server, SavedMailServer};

use mailroom_domain::{AccountId, MailServerId};

use crate::ports::SecretSlot;

pub(crate) fn password_slot(account: AccountId, server: MailServerId) -> SecretSlot {
    SecretSlot {
        table: "mail_servers",
        column: "password",
        row: format!("{account}/{server}"),
    }
}
