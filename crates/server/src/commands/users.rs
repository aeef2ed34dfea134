//! The user-management commands, one handler each: `createUser`, `updateUser`, `dropUser`,
//! `dropAllUsersFromDatabase`, `usersInfo`, `grantRolesToUser`, `revokeRolesFromUser`. Users
//! live in `admin.system.users` (see `auth::users`); what each command needs is decided in
//! `auth::required`, before it runs.

use std::collections::BTreeMap;

use bson::{Bson, Document, RawDocumentBuf, doc};

use crate::auth::EXTERNAL_DB;
use crate::auth::scram::{Credential, Mechanism};
use crate::auth::users::{Directory, RoleName, User, UserName, user_not_found};
use crate::command::Command;
use crate::commands::{int, reply};
use crate::error::CommandError;
use crate::state::Context;

fn user_name(command: &Command) -> Result<UserName, CommandError> {
    match command.argument() {
        Some(Bson::String(user)) if !user.is_empty() => Ok(UserName::new(user, &command.database)),
        Some(Bson::String(_)) => Err(CommandError::bad_value("User name must not be empty")),
        Some(other) => Err(crate::command::mismatch(&command.name, "string", other)),
        None => Err(CommandError::bad_value("a user name is required")),
    }
}

/// `mechanisms` (default: every SCRAM mechanism, or `current` when given).
fn mechanisms(command: &Command, current: Option<&User>) -> Result<Vec<Mechanism>, CommandError> {
    let Some(value) = command.get("mechanisms") else {
        return Ok(match current.map(User::mechanisms) {
            Some(names) if !names.is_empty() => names.into_iter().filter_map(Mechanism::from_name).collect(),
            _ => Mechanism::ALL.to_vec(),
        });
    };
    let Bson::Array(names) = value else { return Err(crate::command::mismatch("mechanisms", "array", value)) };
    if names.is_empty() {
        return Err(CommandError::bad_value("mechanisms field must not be empty"));
    }
    names
        .iter()
        .map(|name| {
            name.as_str()
                .and_then(Mechanism::from_name)
                .ok_or_else(|| CommandError::bad_value(format!("Unknown auth mechanism '{name}'")))
        })
        .collect()
}

/// The stored credentials for `password`.
fn credentials(
    command: &Command,
    name: &UserName,
    password: &str,
    mechanisms: &[Mechanism],
) -> Result<BTreeMap<&'static str, Credential>, CommandError> {
    if password.is_empty() {
        return Err(CommandError::bad_value("Password cannot be empty"));
    }
    let digested = command.optional_bool("digestPassword")?.unwrap_or(true);
    let mut credentials = BTreeMap::new();
    for mechanism in mechanisms {
        let normalized = match (mechanism, digested) {
            (_, true) => {
                mechanism.normalized_password(&name.user, password).map_err(|e| CommandError::bad_value(e.0))?
            }
            (Mechanism::Sha1, false) => password.as_bytes().to_vec(),
            (Mechanism::Sha256, false) => {
                return Err(CommandError::bad_value("Use of SCRAM-SHA-256 requires undigested passwords"));
            }
        };
        credentials.insert(mechanism.name(), Credential::generate(*mechanism, &normalized));
    }
    Ok(credentials)
}

fn custom_data(command: &Command) -> Result<Option<Document>, CommandError> {
    Ok(command.optional_document("customData")?.cloned())
}

pub fn create_user(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name = user_name(command)?;
    let directory = Directory::new(&context.shared.store);
    let mut user = User::new(name.clone());
    match (command.optional_str("pwd")?, name.db == EXTERNAL_DB) {
        (Some(_), true) => {
            return Err(CommandError::bad_value("Cannot set a password for users in the $external database"));
        }
        (Some(password), false) => {
            user.credentials = credentials(command, &name, password, &mechanisms(command, None)?)?;
        }
        (None, true) => {}
        (None, false) => {
            return Err(CommandError::bad_value(
                "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db",
            ));
        }
    }
    user.roles = RoleName::parse_list(command.get("roles"), "roles", &command.database)?;
    directory.check_roles_exist(&user.roles)?;
    user.custom_data = custom_data(command)?;
    directory.create_user(&user)?;
    reply(Document::new())
}

pub fn update_user(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name = user_name(command)?;
    let directory = Directory::new(&context.shared.store);
    let mut user = directory.user(&name)?.ok_or_else(|| user_not_found(&name))?;
    let chosen = mechanisms(command, Some(&user))?;
    match command.optional_str("pwd")? {
        Some(password) => user.credentials = credentials(command, &name, password, &chosen)?,
        None if command.get("mechanisms").is_some() => {
            if let Some(missing) = chosen.iter().find(|m| user.credential(**m).is_none()) {
                return Err(CommandError::bad_value(format!(
                    "mechanisms field must be a subset of previously set mechanisms: {} is not",
                    missing.name()
                )));
            }
            user.credentials.retain(|mechanism, _| chosen.iter().any(|m| m.name() == *mechanism));
        }
        None => {}
    }
    if command.get("roles").is_some() {
        user.roles = RoleName::parse_list(command.get("roles"), "roles", &command.database)?;
        directory.check_roles_exist(&user.roles)?;
    }
    if command.get("customData").is_some() {
        user.custom_data = custom_data(command)?;
    }
    directory.replace_user(&user)?;
    reply(Document::new())
}

pub fn drop_user(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name = user_name(command)?;
    if Directory::new(&context.shared.store).remove_users(doc! { "_id": name.id() })? == 0 {
        return Err(user_not_found(&name));
    }
    reply(Document::new())
}

pub fn drop_all_users_from_database(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let removed = Directory::new(&context.shared.store).remove_users(doc! { "db": command.database.clone() })?;
    reply(doc! { "n": int(removed) })
}

/// Adds (`grant`) or removes the listed roles of a user.
fn change_roles(context: &Context, command: &Command, grant: bool) -> Result<RawDocumentBuf, CommandError> {
    let name = user_name(command)?;
    let roles = RoleName::parse_list(command.get("roles"), "roles", &command.database)?;
    let directory = Directory::new(&context.shared.store);
    directory.check_roles_exist(&roles)?;
    let mut user = directory.user(&name)?.ok_or_else(|| user_not_found(&name))?;
    if grant {
        for role in roles {
            if !user.roles.contains(&role) {
                user.roles.push(role);
            }
        }
    } else {
        user.roles.retain(|role| !roles.contains(role));
    }
    directory.replace_user(&user)?;
    reply(Document::new())
}

pub fn grant_roles_to_user(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    change_roles(context, command, true)
}

pub fn revoke_roles_from_user(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    change_roles(context, command, false)
}

/// `usersInfo`: one user, several, every user of this database (`1`), or of all
/// (`{forAllDBs: true}`); with `showCredentials`, `showPrivileges`, `showCustomData`, `filter`.
pub fn users_info(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let db = command.database.as_str();
    let one = |spec: &Bson| -> Result<Document, CommandError> {
        match spec {
            Bson::String(user) => Ok(doc! { "_id": UserName::new(user, db).id() }),
            Bson::Document(spec) => match (spec.get_str("user"), spec.get_str("db")) {
                (Ok(user), Ok(db)) => Ok(doc! { "_id": UserName::new(user, db).id() }),
                _ => Err(CommandError::bad_value("usersInfo: a user must be given as {user: <name>, db: <db>}")),
            },
            other => Err(crate::command::mismatch("usersInfo", "string or object", other)),
        }
    };
    let mut filter = match command.argument() {
        Some(Bson::Document(spec)) if matches!(spec.get_bool("forAllDBs"), Ok(true)) => Document::new(),
        Some(Bson::Array(specs)) => {
            doc! { "$or": specs.iter().map(|s| one(s).map(Bson::Document)).collect::<Result<Vec<_>, _>>()? }
        }
        Some(spec @ (Bson::String(_) | Bson::Document(_))) => one(spec)?,
        Some(number) if number.as_f64().is_some() || number.as_i32().is_some() || number.as_i64().is_some() => {
            doc! { "db": db }
        }
        Some(other) => return Err(crate::command::mismatch("usersInfo", "number, string, object or array", other)),
        None => doc! { "db": db },
    };
    if let Some(extra) = command.optional_document("filter")? {
        filter = doc! { "$and": [filter, extra.clone()] };
    }
    let show_credentials = command.optional_bool("showCredentials")?.unwrap_or(false);
    let show_privileges = command.optional_bool("showPrivileges")?.unwrap_or(false);
    let show_custom_data = command.optional_bool("showCustomData")?.unwrap_or(true);
    let directory = Directory::new(&context.shared.store);
    let mut users = Vec::new();
    for user in directory.users(filter)? {
        let stored = user.to_document();
        let mut entry = doc! {
            "_id": user.name.id(),
            "userId": user.user_id.clone(),
            "user": user.name.user.clone(),
            "db": user.name.db.clone(),
            "roles": stored.get("roles").cloned().unwrap_or(Bson::Array(Vec::new())),
            "mechanisms": user.mechanisms(),
        };
        if show_custom_data && let Some(custom) = &user.custom_data {
            entry.insert("customData", custom.clone());
        }
        if show_credentials && let Some(credentials) = stored.get("credentials") {
            entry.insert("credentials", credentials.clone());
        }
        if show_privileges {
            let (privileges, roles) = directory.resolve(&user.roles)?;
            entry.insert("inheritedRoles", roles.iter().map(|r| Bson::Document(r.to_document())).collect::<Vec<_>>());
            entry.insert(
                "inheritedPrivileges",
                privileges.iter().map(|p| Bson::Document(p.to_document())).collect::<Vec<_>>(),
            );
        }
        users.push(Bson::Document(entry));
    }
    reply(doc! { "users": users })
}
