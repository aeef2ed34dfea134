//! The role-management commands, one handler each: `createRole`, `updateRole`, `dropRole`,
//! `dropAllRolesFromDatabase`, `rolesInfo`, `grantPrivilegesToRole`,
//! `revokePrivilegesFromRole`, `grantRolesToRole`, `revokeRolesFromRole`. User-defined roles
//! live in `admin.system.roles` (see `auth::users`) and may inherit other roles; the built-in
//! roles are fixed (`auth::privileges`).

use bson::{Bson, Document, RawDocumentBuf, doc};

use crate::auth::privileges::{self, ADMIN_DB, Privilege, Resource};
use crate::auth::users::{Directory, Role, RoleName, privilege_from_bson, role_not_found};
use crate::command::Command;
use crate::commands::{int, reply};
use crate::error::CommandError;
use crate::state::Context;

fn role_name(command: &Command) -> Result<RoleName, CommandError> {
    match command.argument() {
        Some(Bson::String(role)) if !role.is_empty() => Ok(RoleName::new(role, &command.database)),
        Some(other) => Err(crate::command::mismatch(&command.name, "non-empty string", other)),
        None => Err(CommandError::bad_value("a role name is required")),
    }
}

/// `privileges` of a role of `db`: a role outside `admin` may only reach its own database.
fn privileges_field(command: &Command, db: &str) -> Result<Vec<Privilege>, CommandError> {
    let items = match command.get("privileges") {
        Some(Bson::Array(items)) => items,
        Some(other) => return Err(crate::command::mismatch("privileges", "array", other)),
        None => return Err(CommandError::bad_value("BSON field 'privileges' is missing but a required field")),
    };
    let parsed = items.iter().map(privilege_from_bson).collect::<Result<Vec<_>, _>>()?;
    if db != ADMIN_DB
        && parsed.iter().any(|p| !matches!(&p.resource, Resource::Namespace { db: target, .. } if target == db))
    {
        return Err(CommandError::bad_value(format!(
            "Roles on the '{db}' database cannot be granted privileges that target other databases or the cluster"
        )));
    }
    Ok(parsed)
}

/// `roles` of a role of `db`: existing roles, of the same database unless `db` is `admin`.
fn roles_field(directory: &Directory<'_>, command: &Command, db: &str) -> Result<Vec<RoleName>, CommandError> {
    let roles = RoleName::parse_list(command.get("roles"), "roles", db)?;
    if db != ADMIN_DB && roles.iter().any(|role| role.db != db) {
        return Err(CommandError::bad_value(format!(
            "Roles on the '{db}' database cannot inherit roles from other databases"
        )));
    }
    directory.check_roles_exist(&roles)?;
    Ok(roles)
}

fn existing(directory: &Directory<'_>, name: &RoleName) -> Result<Role, CommandError> {
    if privileges::is_builtin(&name.role, &name.db) {
        return Err(CommandError::bad_value(format!("Cannot modify the built-in role {name}")));
    }
    directory.role(name)?.ok_or_else(|| role_not_found(name))
}

pub fn create_role(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name = role_name(command)?;
    if privileges::is_builtin(&name.role, &name.db) {
        return Err(CommandError::bad_value("Cannot create roles with the same name as a built-in role"));
    }
    let directory = Directory::new(&context.shared.store);
    let privileges = privileges_field(command, &name.db)?;
    let roles = roles_field(&directory, command, &name.db)?;
    directory.create_role(&Role { name, privileges, roles })?;
    reply(Document::new())
}

pub fn update_role(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name = role_name(command)?;
    let directory = Directory::new(&context.shared.store);
    let mut role = existing(&directory, &name)?;
    if command.get("privileges").is_some() {
        role.privileges = privileges_field(command, &name.db)?;
    }
    if command.get("roles").is_some() {
        role.roles = roles_field(&directory, command, &name.db)?;
    }
    directory.replace_role(&role)?;
    reply(Document::new())
}

/// Removes `dropped` roles, and their grants to users and other roles.
fn remove_roles(context: &Context, filter: Document) -> Result<u64, CommandError> {
    let directory = Directory::new(&context.shared.store);
    let dropped: Vec<RoleName> = directory.roles(filter.clone())?.into_iter().map(|role| role.name).collect();
    let removed = directory.remove_roles(filter)?;
    for mut user in directory.users(Document::new())? {
        if user.roles.iter().any(|role| dropped.contains(role)) {
            user.roles.retain(|role| !dropped.contains(role));
            directory.replace_user(&user)?;
        }
    }
    for mut role in directory.roles(Document::new())? {
        if role.roles.iter().any(|inherited| dropped.contains(inherited)) {
            role.roles.retain(|inherited| !dropped.contains(inherited));
            directory.replace_role(&role)?;
        }
    }
    Ok(removed)
}

pub fn drop_role(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let name = role_name(command)?;
    existing(&Directory::new(&context.shared.store), &name)?;
    remove_roles(context, doc! { "_id": name.id() })?;
    reply(Document::new())
}

pub fn drop_all_roles_from_database(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let removed = remove_roles(context, doc! { "db": command.database.clone() })?;
    reply(doc! { "n": int(removed) })
}

fn change_privileges(context: &Context, command: &Command, grant: bool) -> Result<RawDocumentBuf, CommandError> {
    let name = role_name(command)?;
    let directory = Directory::new(&context.shared.store);
    let mut role = existing(&directory, &name)?;
    for privilege in privileges_field(command, &name.db)? {
        match role.privileges.iter_mut().find(|held| held.resource == privilege.resource) {
            Some(held) if grant => {
                for action in privilege.actions {
                    if !held.actions.contains(&action) {
                        held.actions.push(action);
                    }
                }
            }
            Some(held) => held.actions.retain(|action| !privilege.actions.contains(action)),
            None if grant => role.privileges.push(privilege),
            None => {}
        }
    }
    role.privileges.retain(|privilege| !privilege.actions.is_empty());
    directory.replace_role(&role)?;
    reply(Document::new())
}

pub fn grant_privileges_to_role(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    change_privileges(context, command, true)
}

pub fn revoke_privileges_from_role(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    change_privileges(context, command, false)
}

fn change_inherited(context: &Context, command: &Command, grant: bool) -> Result<RawDocumentBuf, CommandError> {
    let name = role_name(command)?;
    let directory = Directory::new(&context.shared.store);
    let mut role = existing(&directory, &name)?;
    let listed = roles_field(&directory, command, &name.db)?;
    if grant {
        for inherited in listed {
            if inherited == name {
                return Err(CommandError::location(
                    wire::location::ROLE_GRANTED_TO_ITSELF,
                    format!("Cannot grant role {name} to itself."),
                ));
            }
            if !role.roles.contains(&inherited) {
                role.roles.push(inherited);
            }
        }
    } else {
        role.roles.retain(|inherited| !listed.contains(inherited));
    }
    directory.replace_role(&role)?;
    reply(Document::new())
}

pub fn grant_roles_to_role(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    change_inherited(context, command, true)
}

pub fn revoke_roles_from_role(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    change_inherited(context, command, false)
}

/// `rolesInfo`: one role, several, or every role of this database (`1`), with
/// `showPrivileges` and `showBuiltinRoles`.
pub fn roles_info(context: &Context, command: &Command) -> Result<RawDocumentBuf, CommandError> {
    let db = command.database.as_str();
    let one = |spec: &Bson| -> Result<RoleName, CommandError> {
        match spec {
            Bson::String(role) => Ok(RoleName::new(role, db)),
            Bson::Document(spec) => match (spec.get_str("role"), spec.get_str("db")) {
                (Ok(role), Ok(db)) => Ok(RoleName::new(role, db)),
                _ => Err(CommandError::bad_value("rolesInfo: a role must be given as {role: <name>, db: <db>}")),
            },
            other => Err(crate::command::mismatch("rolesInfo", "string or object", other)),
        }
    };
    let directory = Directory::new(&context.shared.store);
    let names: Vec<RoleName> = match command.argument() {
        Some(Bson::Array(specs)) => specs.iter().map(one).collect::<Result<_, _>>()?,
        Some(spec @ (Bson::String(_) | Bson::Document(_))) => vec![one(spec)?],
        _ => {
            let mut names: Vec<RoleName> =
                directory.roles(doc! { "db": db })?.into_iter().map(|role| role.name).collect();
            if command.optional_bool("showBuiltinRoles")?.unwrap_or(false) {
                let builtin =
                    privileges::DATABASE_ROLES.iter().chain(if db == ADMIN_DB { privileges::ADMIN_ROLES } else { &[] });
                names.extend(builtin.map(|role| RoleName::new(role, db)));
            }
            names
        }
    };
    let show_privileges = matches!(command.get("showPrivileges"), Some(Bson::Boolean(true)));
    let mut roles = Vec::new();
    for name in names {
        let builtin = privileges::is_builtin(&name.role, &name.db);
        let (direct, own_privileges) = match directory.role(&name)? {
            Some(role) => (role.roles, role.privileges),
            None if builtin => (Vec::new(), privileges::builtin_privileges(&name.role, &name.db).unwrap_or_default()),
            None => continue,
        };
        let (inherited_privileges, mut inherited) = directory.resolve(&direct)?;
        inherited.retain(|role| *role != name);
        let as_documents =
            |roles: &[RoleName]| roles.iter().map(|r| Bson::Document(r.to_document())).collect::<Vec<_>>();
        let mut entry = doc! {
            "role": name.role.clone(),
            "db": name.db.clone(),
            "isBuiltin": builtin,
            "roles": as_documents(&direct),
            "inheritedRoles": as_documents(&inherited),
        };
        if show_privileges {
            let privileges =
                |list: &[Privilege]| list.iter().map(|p| Bson::Document(p.to_document())).collect::<Vec<_>>();
            entry.insert("privileges", privileges(&own_privileges));
            let all: Vec<Privilege> = own_privileges.iter().cloned().chain(inherited_privileges).collect();
            entry.insert("inheritedPrivileges", privileges(&all));
        }
        roles.push(Bson::Document(entry));
    }
    reply(doc! { "roles": roles })
}
