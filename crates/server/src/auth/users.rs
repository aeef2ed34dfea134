//! The user and role directory: users in `admin.system.users` and user-defined roles in
//! `admin.system.roles`, in MongoDB's document shapes, read and written through the store like
//! any collection. Each user and each role is one document, so every change to one is atomic,
//! and every write is made durable (`j:true`) before the command that made it answers.
//!
//! ```text
//! system.users: { _id: "db.user", userId: UUID, user, db,
//!                 credentials: { "SCRAM-SHA-1": {iterationCount, salt, storedKey, serverKey},
//!                                "SCRAM-SHA-256": {...} },      (base64 strings, as mongod)
//!                 roles: [{role, db}], customData? }
//! system.roles: { _id: "db.role", role, db, privileges: [{resource, actions}], roles: [{role, db}] }
//! ```
//!
//! A document that does not parse (written by hand through `insert`) is treated as absent,
//! with a log line: it never authenticates anyone.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use docstore::{DeleteRequest, Durability, FindRequest, Store, UpdateModification, UpdateRequest};
use tracing::warn;
use wire::ErrorCode;

use crate::auth::privileges::{self, ADMIN_DB, Privilege, ROLES_COLLECTION, USERS_COLLECTION};
use crate::auth::scram::{Credential, Mechanism};
use crate::error::CommandError;

/// A user: name and the database it authenticates against.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserName {
    pub user: String,
    pub db: String,
}

/// A role: name and the database it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoleName {
    pub role: String,
    pub db: String,
}

impl UserName {
    pub fn new(user: &str, db: &str) -> UserName {
        UserName { user: user.to_owned(), db: db.to_owned() }
    }

    /// The `_id` of the user's document: "db.user".
    pub fn id(&self) -> String {
        format!("{}.{}", self.db, self.user)
    }

    pub fn to_document(&self) -> Document {
        doc! { "user": self.user.clone(), "db": self.db.clone() }
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.user, self.db)
    }
}

impl RoleName {
    pub fn new(role: &str, db: &str) -> RoleName {
        RoleName { role: role.to_owned(), db: db.to_owned() }
    }

    pub fn id(&self) -> String {
        format!("{}.{}", self.db, self.role)
    }

    pub fn to_document(&self) -> Document {
        doc! { "role": self.role.clone(), "db": self.db.clone() }
    }

    fn from_document(document: &Document) -> Option<RoleName> {
        Some(RoleName::new(document.get_str("role").ok()?, document.get_str("db").ok()?))
    }

    /// Roles as commands give them: "name" (in `default_db`) or `{role, db}`.
    pub fn parse_list(value: Option<&Bson>, field: &str, default_db: &str) -> Result<Vec<RoleName>, CommandError> {
        let items = match value {
            Some(Bson::Array(items)) => items,
            Some(other) => return Err(crate::command::mismatch(field, "array", other)),
            None => {
                return Err(CommandError::bad_value(format!("BSON field '{field}' is missing but a required field")));
            }
        };
        items
            .iter()
            .map(|item| match item {
                Bson::String(role) => Ok(RoleName::new(role, default_db)),
                Bson::Document(document) => RoleName::from_document(document).ok_or_else(|| {
                    CommandError::bad_value(format!(
                        "a role in '{field}' must be a string or {{role: <name>, db: <db>}}"
                    ))
                }),
                other => Err(crate::command::mismatch(field, "string or object", other)),
            })
            .collect()
    }
}

impl fmt::Display for RoleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.role, self.db)
    }
}

/// One user as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    pub name: UserName,
    pub user_id: Binary,
    pub credentials: BTreeMap<&'static str, Credential>,
    pub roles: Vec<RoleName>,
    pub custom_data: Option<Document>,
}

impl User {
    pub fn new(name: UserName) -> User {
        let user_id = Binary { subtype: BinarySubtype::Uuid, bytes: crate::auth::random_uuid() };
        User { name, user_id, credentials: BTreeMap::new(), roles: Vec::new(), custom_data: None }
    }

    pub fn credential(&self, mechanism: Mechanism) -> Option<&Credential> {
        self.credentials.get(mechanism.name())
    }

    pub fn mechanisms(&self) -> Vec<&'static str> {
        self.credentials.keys().copied().collect()
    }

    pub fn to_document(&self) -> Document {
        let mut credentials = Document::new();
        for (mechanism, credential) in &self.credentials {
            credentials.insert(
                *mechanism,
                doc! {
                    "iterationCount": i32::try_from(credential.iterations).unwrap_or(i32::MAX),
                    "salt": BASE64.encode(&credential.salt),
                    "storedKey": BASE64.encode(&credential.stored_key),
                    "serverKey": BASE64.encode(&credential.server_key),
                },
            );
        }
        let mut document = doc! {
            "_id": self.name.id(),
            "userId": self.user_id.clone(),
            "user": self.name.user.clone(),
            "db": self.name.db.clone(),
            "credentials": credentials,
            "roles": self.roles.iter().map(|role| Bson::Document(role.to_document())).collect::<Vec<_>>(),
        };
        if let Some(custom_data) = &self.custom_data {
            document.insert("customData", custom_data.clone());
        }
        document
    }

    pub fn from_document(document: &Document) -> Option<User> {
        let name = UserName::new(document.get_str("user").ok()?, document.get_str("db").ok()?);
        let user_id = match document.get("userId")? {
            Bson::Binary(binary) => binary.clone(),
            _ => return None,
        };
        let mut credentials = BTreeMap::new();
        if let Ok(stored) = document.get_document("credentials") {
            for mechanism in Mechanism::ALL {
                if let Ok(fields) = stored.get_document(mechanism.name()) {
                    credentials.insert(mechanism.name(), credential_from_document(fields)?);
                }
            }
        }
        let roles = document
            .get_array("roles")
            .ok()?
            .iter()
            .map(|role| role.as_document().and_then(RoleName::from_document))
            .collect::<Option<Vec<_>>>()?;
        let custom_data = document.get_document("customData").ok().cloned();
        Some(User { name, user_id, credentials, roles, custom_data })
    }
}

fn credential_from_document(fields: &Document) -> Option<Credential> {
    let decode = |key: &str| BASE64.decode(fields.get_str(key).ok()?).ok();
    Some(Credential {
        iterations: u32::try_from(fields.get_i32("iterationCount").ok()?).ok()?,
        salt: decode("salt")?,
        stored_key: decode("storedKey")?,
        server_key: decode("serverKey")?,
    })
}

/// A user-defined role as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Role {
    pub name: RoleName,
    pub privileges: Vec<Privilege>,
    pub roles: Vec<RoleName>,
}

impl Role {
    pub fn to_document(&self) -> Document {
        doc! {
            "_id": self.name.id(),
            "role": self.name.role.clone(),
            "db": self.name.db.clone(),
            "privileges": self.privileges.iter().map(|p| Bson::Document(p.to_document())).collect::<Vec<_>>(),
            "roles": self.roles.iter().map(|role| Bson::Document(role.to_document())).collect::<Vec<_>>(),
        }
    }

    pub fn from_document(document: &Document) -> Option<Role> {
        let name = RoleName::new(document.get_str("role").ok()?, document.get_str("db").ok()?);
        let privileges = document
            .get_array("privileges")
            .ok()?
            .iter()
            .map(|privilege| privilege_from_bson(privilege).ok())
            .collect::<Option<Vec<_>>>()?;
        let roles = document
            .get_array("roles")
            .ok()?
            .iter()
            .map(|role| role.as_document().and_then(RoleName::from_document))
            .collect::<Option<Vec<_>>>()?;
        Some(Role { name, privileges, roles })
    }
}

/// A privilege as `createRole` and `grantPrivilegesToRole` give it: `{resource, actions}`.
pub fn privilege_from_bson(value: &Bson) -> Result<Privilege, CommandError> {
    let invalid = |why: &str| CommandError::bad_value(format!("invalid privilege: {why}"));
    let document = value.as_document().ok_or_else(|| invalid("a privilege must be an object"))?;
    let resource = document
        .get_document("resource")
        .ok()
        .and_then(privileges::Resource::from_document)
        .ok_or_else(|| invalid("'resource' must be {db, collection}, {cluster: true} or {anyResource: true}"))?;
    let actions = document.get_array("actions").map_err(|_| invalid("'actions' must be an array"))?;
    let actions = actions
        .iter()
        .map(|action| {
            action
                .as_str()
                .and_then(privileges::Action::from_name)
                .ok_or_else(|| invalid(&format!("unknown action {action}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Privilege { resource, actions })
}

/// Reads and writes users and roles in the store.
pub struct Directory<'s> {
    store: &'s Store,
}

impl<'s> Directory<'s> {
    pub fn new(store: &'s Store) -> Directory<'s> {
        Directory { store }
    }

    pub fn user(&self, name: &UserName) -> Result<Option<User>, CommandError> {
        if let Some(internal) = crate::auth::internal_user(name) {
            return Ok(Some(internal));
        }
        Ok(self.users(doc! { "_id": name.id() })?.into_iter().next())
    }

    /// Users matching `filter` (on the stored documents), sorted by name.
    pub fn users(&self, filter: Document) -> Result<Vec<User>, CommandError> {
        let mut users: Vec<User> = self
            .documents(USERS_COLLECTION, filter)?
            .iter()
            .filter_map(|document| parsed(document, User::from_document, "user"))
            .collect();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(users)
    }

    /// True if at least one user exists (the localhost exception ends with the first user).
    pub fn has_users(&self) -> bool {
        self.store.collection((ADMIN_DB, USERS_COLLECTION)).estimated_document_count().is_ok_and(|count| count > 0)
    }

    /// Adds a user; "already exists" if one has that name.
    pub fn create_user(&self, user: &User) -> Result<(), CommandError> {
        self.create(
            USERS_COLLECTION,
            user.to_document(),
            || format!("User \"{}\" already exists", user.name),
            wire::location::USER_ALREADY_EXISTS,
        )
    }

    /// Replaces a user's document; `UserNotFound` if there is none.
    pub fn replace_user(&self, user: &User) -> Result<(), CommandError> {
        if !self.replace(USERS_COLLECTION, user.name.id(), user.to_document())? {
            return Err(user_not_found(&user.name));
        }
        Ok(())
    }

    /// Removes users matching `filter`; returns how many.
    pub fn remove_users(&self, filter: Document) -> Result<u64, CommandError> {
        self.remove(USERS_COLLECTION, filter)
    }

    pub fn role(&self, name: &RoleName) -> Result<Option<Role>, CommandError> {
        Ok(self.roles(doc! { "_id": name.id() })?.into_iter().next())
    }

    pub fn roles(&self, filter: Document) -> Result<Vec<Role>, CommandError> {
        let mut roles: Vec<Role> = self
            .documents(ROLES_COLLECTION, filter)?
            .iter()
            .filter_map(|document| parsed(document, Role::from_document, "role"))
            .collect();
        roles.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(roles)
    }

    pub fn create_role(&self, role: &Role) -> Result<(), CommandError> {
        self.create(
            ROLES_COLLECTION,
            role.to_document(),
            || format!("Role \"{}\" already exists", role.name),
            wire::location::ROLE_ALREADY_EXISTS,
        )
    }

    pub fn replace_role(&self, role: &Role) -> Result<(), CommandError> {
        if !self.replace(ROLES_COLLECTION, role.name.id(), role.to_document())? {
            return Err(role_not_found(&role.name));
        }
        Ok(())
    }

    pub fn remove_roles(&self, filter: Document) -> Result<u64, CommandError> {
        self.remove(ROLES_COLLECTION, filter)
    }

    /// Checks every role exists (built-in or defined).
    pub fn check_roles_exist(&self, roles: &[RoleName]) -> Result<(), CommandError> {
        for role in roles {
            if !privileges::is_builtin(&role.role, &role.db) && self.role(role)?.is_none() {
                return Err(role_not_found(role));
            }
        }
        Ok(())
    }

    /// Everything `roles` grant, with the roles they inherit: (privileges, every role reached).
    /// A role that no longer exists grants nothing; a cycle is walked once.
    pub fn resolve(&self, roles: &[RoleName]) -> Result<(Vec<Privilege>, Vec<RoleName>), CommandError> {
        let mut reached: Vec<RoleName> = Vec::new();
        let mut privileges = Vec::new();
        let mut pending: Vec<RoleName> = roles.to_vec();
        while let Some(role) = pending.pop() {
            if reached.contains(&role) {
                continue;
            }
            if let Some(builtin) = privileges::builtin_privileges(&role.role, &role.db) {
                privileges.extend(builtin);
            } else if let Some(defined) = self.role(&role)? {
                privileges.extend(defined.privileges);
                pending.extend(defined.roles);
            } else {
                continue;
            }
            reached.push(role);
        }
        reached.sort();
        Ok((privileges, reached))
    }

    fn documents(&self, collection: &str, filter: Document) -> Result<Vec<Document>, CommandError> {
        if self.store.collection((ADMIN_DB, collection)).estimated_document_count().is_err() {
            return Ok(Vec::new());
        }
        let request = FindRequest { filter, ..FindRequest::default() };
        let mut cursor = self.store.collection((ADMIN_DB, collection)).find(&request)?;
        let raw = cursor.next_batch(usize::MAX, usize::MAX)?;
        raw.iter().map(|document| Ok(Document::try_from(document.as_ref())?)).collect()
    }

    fn create(
        &self,
        collection: &str,
        document: Document,
        exists: impl Fn() -> String,
        exists_code: i32,
    ) -> Result<(), CommandError> {
        self.store.collection((ADMIN_DB, collection)).ensure_system(bson::Document::new())?;
        let raw = bson::RawDocumentBuf::try_from(&document)?;
        let outcome = self.store.collection((ADMIN_DB, collection)).insert(vec![raw], true, Durability::Immediate);
        if let Some(error) = outcome.durability_error {
            return Err(error.into());
        }
        match outcome.errors.into_iter().next() {
            None => Ok(()),
            Some((_, docstore::Error::DuplicateKey { .. })) => Err(CommandError::location(exists_code, exists())),
            Some((_, error)) => Err(error.into()),
        }
    }

    fn replace(&self, collection: &str, id: String, document: Document) -> Result<bool, CommandError> {
        let request = UpdateRequest {
            filter: doc! { "_id": id },
            update: UpdateModification::Document(document),
            multi: false,
            upsert: false,
            array_filters: Vec::new(),
            hint: None,
            variables: Default::default(),
            collation: None,
        };
        match self.store.collection((ADMIN_DB, collection)).update(&request, Durability::Immediate) {
            Ok(outcome) => Ok(outcome.matched > 0),
            Err(docstore::Error::NamespaceNotFound(_)) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    fn remove(&self, collection: &str, filter: Document) -> Result<u64, CommandError> {
        let request = DeleteRequest { filter, just_one: false, ..DeleteRequest::default() };
        match self.store.collection((ADMIN_DB, collection)).delete(&request, Durability::Immediate) {
            Ok(removed) => Ok(removed),
            Err(docstore::Error::NamespaceNotFound(_)) => Ok(0),
            Err(error) => Err(error.into()),
        }
    }
}

fn parsed<T>(document: &Document, parse: impl Fn(&Document) -> Option<T>, what: &str) -> Option<T> {
    let value = parse(document);
    if value.is_none() {
        warn!(id = %document.get("_id").cloned().unwrap_or(Bson::Null), "ignoring a malformed {what} document");
    }
    value
}

pub fn user_not_found(name: &UserName) -> CommandError {
    CommandError::new(ErrorCode::UserNotFound, format!("Could not find user \"{}\" for db \"{}\"", name.user, name.db))
}

pub fn role_not_found(name: &RoleName) -> CommandError {
    CommandError::new(ErrorCode::RoleNotFound, format!("Could not find role: {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use docstore::StoreOptions;

    fn user(name: &str, db: &str) -> User {
        let mut user = User::new(UserName::new(name, db));
        for mechanism in Mechanism::ALL {
            let normalized = mechanism.normalized_password(name, "pw").unwrap();
            user.credentials.insert(mechanism.name(), Credential::generate(mechanism, &normalized));
        }
        user.roles = vec![RoleName::new("read", db)];
        user
    }

    #[test]
    fn users_round_trip_through_the_store() {
        let store = Store::open_in_memory(StoreOptions::default()).unwrap();
        let directory = Directory::new(&store);
        assert!(!directory.has_users());
        let ann = user("ann", "test");
        directory.create_user(&ann).unwrap();
        assert!(directory.has_users());
        assert_eq!(directory.user(&ann.name).unwrap(), Some(ann.clone()));
        let again = directory.create_user(&ann).unwrap_err();
        assert_eq!(again.code.number(), 51003);
        let mut changed = ann.clone();
        changed.roles.push(RoleName::new("readWrite", "other"));
        directory.replace_user(&changed).unwrap();
        assert_eq!(directory.user(&ann.name).unwrap().unwrap().roles.len(), 2);
        assert_eq!(directory.replace_user(&user("bob", "test")).unwrap_err().code, ErrorCode::UserNotFound);
        assert_eq!(directory.remove_users(doc! { "_id": ann.name.id() }).unwrap(), 1);
        assert_eq!(directory.user(&ann.name).unwrap(), None);
    }

    /// Goal: defined roles inherit, cycles end, and missing roles grant nothing.
    #[test]
    fn role_resolution() {
        let store = Store::open_in_memory(StoreOptions::default()).unwrap();
        let directory = Directory::new(&store);
        let a = Role {
            name: RoleName::new("a", "test"),
            privileges: vec![Privilege::new(
                privileges::Resource::collection("test", "x"),
                &[privileges::Action::Find],
            )],
            roles: vec![RoleName::new("b", "test")],
        };
        let b = Role {
            name: RoleName::new("b", "test"),
            privileges: Vec::new(),
            roles: vec![RoleName::new("a", "test"), RoleName::new("read", "other")],
        };
        directory.create_role(&a).unwrap();
        directory.create_role(&b).unwrap();
        let (granted, reached) =
            directory.resolve(&[RoleName::new("a", "test"), RoleName::new("gone", "test")]).unwrap();
        assert_eq!(
            reached,
            vec![RoleName::new("a", "test"), RoleName::new("b", "test"), RoleName::new("read", "other")]
        );
        let target = privileges::Target::Collection("other".into(), "y".into());
        assert!(privileges::allows(&granted, &target, privileges::Action::Find));
    }
}
