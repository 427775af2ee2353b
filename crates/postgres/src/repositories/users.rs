use diesel::prelude::*;
use mailroom_app::{
    ports::{UserRecord, UserRepository},
    StoreError,
};
use mailroom_domain::UserId;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{lower, timestamp, PgUnitOfWork};
use crate::{error::store_error, schema::users};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = users, check_for_backend(diesel::pg::Pg))]
struct UserRow {
    id: Uuid,
    email: String,
    created_at: OffsetDateTime,
}

impl UserRepository for PgUnitOfWork<'_> {
    fn find_user_by_email(&mut self, email: &str) -> Result<Option<UserRecord>, StoreError> {
        users::table
            .filter(lower(users::email).eq(email.to_lowercase()))
            .select(UserRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(store_error)
            .map(|row| {
                row.map(|row| UserRecord {
                    id: UserId::from_uuid(row.id),
                    email: row.email,
                    created_at: timestamp(row.created_at),
                })
            })
    }

    fn insert_user(&mut self, user: &UserRecord) -> Result<(), StoreError> {
        diesel::insert_into(users::table)
            .values(UserRow {
                id: user.id.as_uuid(),
                email: user.email.clone(),
                created_at: user.created_at.as_datetime(),
            })
            .execute(self.conn)
            .map(drop)
            .map_err(store_error)
    }
}
