//! Access control: who a connection is (authentication) and what it may do (authorization).
//!
//! Authentication is SCRAM over `saslStart`/`saslContinue` (or `speculativeAuthenticate` in
//! `hello`), against the users of the [`users::Directory`]. Each connection holds an
//! [`Authentication`]: its user (a connection authenticates as one user at a time, as in
//! MongoDB 5+), the privileges that user's roles grant, and a SASL conversation in progress.
//!
//! Authorization is decided in one place, [`authorize`], which dispatch calls before any
//! handler runs: [`required::need`] says what the command needs (nothing, any authenticated
//! user, or actions on resources), and the connection's privileges answer. A refused command
//! has had no effect. The privileges are resolved when the user authenticates and again
//! whenever any user or role changes ([`Security::changed`] bumps a generation that each
//! connection compares before its next command), so a dropped user or a revoked role takes
//! effect on that user's open connections at their next command.
//!
//! With `--auth` off (the default), every command is allowed, and authentication still works
//! (drivers given credentials authenticate; `connectionStatus` shows the user).

pub mod privileges;
pub mod required;
pub mod scram;
pub mod users;

/// The replica set's own user, `__system@local`, which members log in as (see
/// `replication::member_auth`); set once at startup.
static INTERNAL_USER: std::sync::OnceLock<users::User> = std::sync::OnceLock::new();

/// Makes `__system@local` known, with the `__system` role: every action, the members' own
/// `internal` one included. With `key`, the key is its password (SCRAM-SHA-256); without,
/// only a member's certificate logs in as it (MONGODB-X509, [`authenticate_x509`]).
pub fn set_internal_user(key: Option<&str>) -> Result<(), String> {
    let name = users::UserName::new(crate::replication::member_auth::USER, crate::replication::member_auth::DB);
    let mut user = users::User::new(name);
    if let Some(key) = key {
        let mechanism = scram::Mechanism::Sha256;
        let normalized = mechanism.normalized_password(&user.name.user, key).map_err(|e| e.0)?;
        user.credentials.insert(mechanism.name(), scram::Credential::generate(mechanism, &normalized));
    }
    user.roles = vec![users::RoleName::new("__system", "admin")];
    let _ = INTERNAL_USER.set(user);
    Ok(())
}

/// The internal user, if `name` is it and members authenticate.
pub fn internal_user(name: &users::UserName) -> Option<users::User> {
    INTERNAL_USER.get().filter(|user| user.name == *name).cloned()
}

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

use bson::{Binary, Bson, Document, doc, spec::BinarySubtype};
use tracing::{info, warn};
use wire::ErrorCode;

use crate::command::Command;
use crate::error::CommandError;
use crate::state::Context;
use privileges::{Action, Privilege, Target};
use scram::{ClientFirst, Conversation, Mechanism};
use users::{Directory, RoleName, UserName};

/// What every connection shares about access control.
pub struct Security {
    /// `--auth`: commands need an authenticated user with the privileges they require.
    pub enabled: bool,
    /// Bumped by every change to users or roles.
    generation: AtomicU64,
    /// Keys the decoy credentials of unknown users (see `scram::decoy_credential`).
    decoy_secret: Vec<u8>,
    pub counters: AuthCounters,
    /// With X.509 membership (`--clusterAuthMode` other than keyFile): the subject attributes
    /// of this member's own certificate (`tls::member_attributes`, never empty); a client whose
    /// certificate has the same ones is a member, and logs in as `__system@local`.
    pub member_attributes: Option<Vec<(String, String)>>,
}

/// serverStatus's `security.authentication` counts.
#[derive(Default)]
pub struct AuthCounters {
    pub sha1: MechanismCounters,
    pub sha256: MechanismCounters,
    pub x509: MechanismCounters,
    pub failed: AtomicU64,
}

#[derive(Default)]
pub struct MechanismCounters {
    pub received: AtomicU64,
    pub successful: AtomicU64,
}

impl AuthCounters {
    pub fn of(&self, method: Method) -> &MechanismCounters {
        match method {
            Method::Scram(Mechanism::Sha1) => &self.sha1,
            Method::Scram(Mechanism::Sha256) => &self.sha256,
            Method::X509 => &self.x509,
        }
    }
}

/// How a user proves who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Scram(Mechanism),
    /// MONGODB-X509: the subject of the client's TLS certificate names a user of `$external`.
    X509,
}

impl Method {
    pub const ALL: [Method; 3] = [Method::Scram(Mechanism::Sha1), Method::Scram(Mechanism::Sha256), Method::X509];

    pub fn name(self) -> &'static str {
        match self {
            Method::Scram(mechanism) => mechanism.name(),
            Method::X509 => X509_MECHANISM,
        }
    }
}

pub const X509_MECHANISM: &str = "MONGODB-X509";
/// The database of users who authenticate by certificate.
pub const EXTERNAL_DB: &str = "$external";

impl Security {
    pub fn new(enabled: bool, member_attributes: Option<Vec<(String, String)>>) -> Security {
        Security {
            enabled,
            member_attributes,
            generation: AtomicU64::new(0),
            decoy_secret: scram::random_bytes(32),
            counters: AuthCounters::default(),
        }
    }

    /// Users or roles changed: every connection re-resolves its privileges.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Relaxed);
    }

    fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }
}

/// A connection's identity.
#[derive(Default)]
pub struct Authentication {
    user: Option<Authenticated>,
    /// The security generation `user`'s privileges were resolved at.
    generation: u64,
    pending: Option<Pending>,
    next_conversation_id: i32,
    /// The client's verified TLS certificate: its subject in RFC 4514 form, and the
    /// attributes that would make it a member's (`tls::member_attributes`).
    certificate: Option<(String, Vec<(String, String)>)>,
}

/// The connection's user, with what its roles grant.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub name: UserName,
    /// Every role the user has, inherited ones included.
    pub roles: Vec<RoleName>,
    pub privileges: Vec<Privilege>,
}

/// A SASL conversation between its first and last message.
struct Pending {
    id: i32,
    conversation: Conversation,
    /// The database the user is looked up in.
    db: String,
    skip_empty_exchange: bool,
    /// The proof was checked; waiting for the client's empty last message.
    proven: bool,
}

impl Authentication {
    pub fn user(&self) -> Option<&Authenticated> {
        self.user.as_ref()
    }

    /// The authenticated users, as cursors record their owner (none or one).
    pub fn users(&self) -> Vec<UserName> {
        self.user.iter().map(|user| user.name.clone()).collect()
    }
}

/// The authentication state of the context's connection. Only the connection's own thread
/// takes this lock (it is a lock, not a `RefCell`, so that a `Context` is `Sync`).
pub fn state(context: &Context) -> MutexGuard<'_, Authentication> {
    context.auth.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// A new random UUID (version 4) as 16 bytes.
pub fn random_uuid() -> Vec<u8> {
    let mut bytes = scram::random_bytes(16);
    if let Some(version) = bytes.get_mut(6) {
        *version = (*version & 0x0f) | 0x40;
    }
    if let Some(variant) = bytes.get_mut(8) {
        *variant = (*variant & 0x3f) | 0x80;
    }
    bytes
}

fn authentication_failed() -> CommandError {
    CommandError::new(ErrorCode::AuthenticationFailed, "Authentication failed.")
}

fn payload_bytes(body: &Document) -> Result<Vec<u8>, CommandError> {
    match body.get("payload") {
        Some(Bson::Binary(binary)) => Ok(binary.bytes.clone()),
        Some(Bson::String(text)) => Ok(text.clone().into_bytes()),
        Some(other) => Err(crate::command::mismatch("payload", "binData", other)),
        None => Err(CommandError::bad_value("BSON field 'payload' is missing but a required field")),
    }
}

fn payload(text: &str) -> Bson {
    Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: text.as_bytes().to_vec() })
}

/// `saslStart` (or `hello`'s `speculativeAuthenticate`) on database `db`: the server's first
/// message. An unknown user gets a decoy credential and fails only at the proof, like a wrong
/// password.
pub fn sasl_start(context: &Context, db: &str, body: &Document) -> Result<Document, CommandError> {
    let name =
        body.get_str("mechanism").map_err(|_| CommandError::bad_value("saslStart needs a 'mechanism' string"))?;
    let Some(mechanism) = Mechanism::from_name(name) else {
        return Err(CommandError::new(
            ErrorCode::MechanismUnavailable,
            format!("Received authentication for mechanism {name} which is not enabled"),
        ));
    };
    let counters = &context.shared.security.counters;
    counters.of(Method::Scram(mechanism)).received.fetch_add(1, Relaxed);
    let first = ClientFirst::parse(&payload_bytes(body)?).map_err(|error| {
        failed(context, Method::Scram(mechanism), &UserName::new("", db), &error.0);
        authentication_failed()
    })?;
    let name = UserName::new(&first.user, db);
    let stored = Directory::new(&context.shared.store).user(&name)?;
    let credential = match stored.as_ref().and_then(|user| user.credential(mechanism)) {
        Some(credential) => credential.clone(),
        None => scram::decoy_credential(mechanism, &context.shared.security.decoy_secret, &name.id()),
    };
    let (conversation, server_first) = Conversation::start(mechanism, first, credential, &scram::server_nonce());
    let skip_empty_exchange =
        body.get_document("options").is_ok_and(|o| matches!(o.get_bool("skipEmptyExchange"), Ok(true)));
    let mut state = state(context);
    state.next_conversation_id = state.next_conversation_id.wrapping_add(1).max(1);
    let id = state.next_conversation_id;
    state.pending = Some(Pending { id, conversation, db: db.to_owned(), skip_empty_exchange, proven: false });
    Ok(doc! { "conversationId": id, "done": false, "payload": payload(&server_first) })
}

/// `saslContinue`: checks the proof (answering with the server's signature), or ends the
/// conversation.
pub fn sasl_continue(context: &Context, body: &Document) -> Result<Document, CommandError> {
    let id = match body.get("conversationId") {
        Some(Bson::Int32(id)) => *id,
        Some(Bson::Int64(id)) => i32::try_from(*id).unwrap_or(-1),
        Some(Bson::Double(id)) if id.fract() == 0.0 => *id as i32,
        _ => return Err(CommandError::bad_value("saslContinue needs a 'conversationId'")),
    };
    let client_payload = payload_bytes(body)?;
    let Some(mut pending) = state(context).pending.take().filter(|pending| pending.id == id) else {
        return Err(CommandError::new(ErrorCode::ProtocolError, "No SASL session state found"));
    };
    let mechanism = pending.conversation.mechanism;
    let name = UserName::new(&pending.conversation.user, &pending.db);
    if pending.proven {
        if !client_payload.is_empty() {
            failed(context, Method::Scram(mechanism), &name, "the last SASL message was not empty");
            return Err(authentication_failed());
        }
        login(context, &name, Method::Scram(mechanism))?;
        return Ok(doc! { "conversationId": id, "done": true, "payload": payload("") });
    }
    let server_final = match pending.conversation.finish(&client_payload) {
        Ok(server_final) => server_final,
        Err(error) => {
            failed(context, Method::Scram(mechanism), &name, &error.0);
            return Err(authentication_failed());
        }
    };
    if pending.skip_empty_exchange {
        login(context, &name, Method::Scram(mechanism))?;
        return Ok(doc! { "conversationId": id, "done": true, "payload": payload(&server_final) });
    }
    pending.proven = true;
    state(context).pending = Some(pending);
    Ok(doc! { "conversationId": id, "done": false, "payload": payload(&server_final) })
}

/// A failed authentication: logged with the client's address and the user name (never a
/// secret), and counted.
fn failed(context: &Context, method: Method, name: &UserName, why: &str) {
    context.shared.security.counters.failed.fetch_add(1, Relaxed);
    warn!(
        connection = context.connection.id,
        client = %context.connection.peer,
        user = %name,
        mechanism = method.name(),
        reason = why,
        "authentication failed"
    );
}

/// The proof was right: the connection is now `name`, with its roles' privileges.
fn login(context: &Context, name: &UserName, method: Method) -> Result<(), CommandError> {
    let directory = Directory::new(&context.shared.store);
    // The user may have been dropped during the conversation.
    let Some(user) = directory.user(name)? else {
        failed(context, method, name, "the user does not exist");
        return Err(authentication_failed());
    };
    if let Some(current) = state(context).user().filter(|current| current.name != *name) {
        return Err(CommandError::new(
            ErrorCode::Unauthorized,
            format!(
                "Each client connection may only be authenticated once. Previously authenticated as: {}",
                current.name
            ),
        ));
    }
    let generation = context.shared.security.generation();
    let (privileges, roles) = directory.resolve(&user.roles)?;
    let mut state = state(context);
    state.user = Some(Authenticated { name: name.clone(), roles, privileges });
    state.generation = generation;
    drop(state);
    context.shared.security.counters.of(method).successful.fetch_add(1, Relaxed);
    info!(connection = context.connection.id, client = %context.connection.peer, user = %name, mechanism = method.name(), "authenticated");
    Ok(())
}

/// The connection's client presented a verified certificate with this subject and these
/// member attributes.
pub fn set_certificate(context: &Context, subject: String, member_attributes: Vec<(String, String)>) {
    state(context).certificate = Some((subject, member_attributes));
}

/// `authenticate` with MONGODB-X509 (or `hello`'s speculative form): the user of `$external`
/// named by the subject of the client's verified certificate. Returns `{dbname, user}`.
pub fn authenticate_x509(context: &Context, db: &str, body: &Document) -> Result<Document, CommandError> {
    let mechanism = body.get_str("mechanism").unwrap_or_default();
    if mechanism != X509_MECHANISM {
        return Err(CommandError::new(
            ErrorCode::MechanismUnavailable,
            format!("Received authentication for mechanism {mechanism} which is not enabled"),
        ));
    }
    context.shared.security.counters.x509.received.fetch_add(1, Relaxed);
    if db != EXTERNAL_DB {
        return Err(CommandError::bad_value("X.509 authentication must always use the $external database."));
    }
    let Some((subject, attributes)) = state(context).certificate.clone() else {
        failed(context, Method::X509, &UserName::new("", db), "no verified client certificate");
        return Err(CommandError::new(
            ErrorCode::AuthenticationFailed,
            "No verified subject name available from client",
        ));
    };
    if let Ok(claimed) = body.get_str("user")
        && claimed != subject
    {
        failed(context, Method::X509, &UserName::new(claimed, db), "the user is not the certificate's subject");
        return Err(authentication_failed());
    }
    // A member's certificate (the same organization, units and domain as ours) logs in as the
    // members' own user, as with mongod's `--clusterAuthMode x509`.
    let member = context.shared.security.member_attributes.as_ref().is_some_and(|own| *own == attributes);
    let name = if member {
        UserName::new(crate::replication::member_auth::USER, crate::replication::member_auth::DB)
    } else {
        UserName::new(&subject, EXTERNAL_DB)
    };
    login(context, &name, Method::X509)?;
    Ok(doc! { "dbname": EXTERNAL_DB, "user": subject })
}

/// `logout`: the connection is nobody again.
pub fn logout(context: &Context) {
    let mut state = state(context);
    state.user = None;
    state.pending = None;
}

/// Re-resolves the user's privileges if users or roles changed since they were resolved; a
/// user that was dropped is logged out.
fn refresh(context: &Context) -> Result<(), CommandError> {
    let generation = context.shared.security.generation();
    let stale = {
        let state = state(context);
        state.user.is_some() && state.generation != generation
    };
    if !stale {
        return Ok(());
    }
    let name = match state(context).user() {
        Some(user) => user.name.clone(),
        None => return Ok(()),
    };
    let directory = Directory::new(&context.shared.store);
    let resolved = match directory.user(&name)? {
        Some(user) => {
            let (privileges, roles) = directory.resolve(&user.roles)?;
            Some(Authenticated { name, roles, privileges })
        }
        None => None,
    };
    let mut state = state(context);
    state.user = resolved;
    state.generation = generation;
    Ok(())
}

/// True if access control is on and the connection has not authenticated.
pub fn is_stranger(context: &Context) -> bool {
    context.shared.security.enabled && state(context).user().is_none()
}

/// True if the connection may do `action` on `target` (always, without `--auth`).
pub fn may(context: &Context, target: &Target, action: Action) -> bool {
    !context.shared.security.enabled
        || state(context).user().is_some_and(|user| privileges::allows(&user.privileges, target, action))
}

/// True if the connection has any privilege in database `db` (what `listDatabases` with
/// `authorizedDatabases` shows).
pub fn may_see_database(context: &Context, db: &str) -> bool {
    if !context.shared.security.enabled {
        return true;
    }
    let state = state(context);
    let Some(user) = state.user() else { return false };
    user.privileges.iter().any(|privilege| match &privilege.resource {
        privileges::Resource::Any => true,
        privileges::Resource::Namespace { db: pattern, .. } => pattern.is_empty() || pattern == db,
        privileges::Resource::Cluster => false,
    })
}

/// True if the connection has any privilege on collection `db.collection`.
pub fn may_see_collection(context: &Context, db: &str, collection: &str) -> bool {
    if !context.shared.security.enabled {
        return true;
    }
    let target = Target::Collection(db.to_owned(), collection.to_owned());
    state(context).user().is_some_and(|user| user.privileges.iter().any(|privilege| privilege.resource.covers(&target)))
}

/// Who owns a cursor this connection opens.
pub fn owner(context: &Context) -> Vec<UserName> {
    state(context).users()
}

/// The error for a cursor another user opened.
pub fn not_owner(id: i64) -> CommandError {
    CommandError::new(ErrorCode::Unauthorized, format!("cursor id {id} was not created by the authenticated user"))
}

/// True if the connection is the one that opened a cursor owned by `owner`.
pub fn owns(context: &Context, owner: &[UserName]) -> bool {
    !context.shared.security.enabled || state(context).users() == owner
}

/// The one place a command is allowed or refused, before its handler runs.
pub fn authorize(context: &Context, command: &Command) -> Result<(), CommandError> {
    if !context.shared.security.enabled {
        return Ok(());
    }
    refresh(context)?;
    let current = state(context).user().map(|user| user.name.clone());
    let requires_authentication =
        || CommandError::new(ErrorCode::Unauthorized, format!("Command {} requires authentication", command.name));
    let need = match required::need(command, current.as_ref()) {
        Ok(need) => need,
        // A stranger learns nothing from how its arguments are wrong.
        Err(_) if current.is_none() => return Err(requires_authentication()),
        Err(error) => return Err(error),
    };
    if matches!(need, required::Need::Nothing) {
        return Ok(());
    }
    let state = state(context);
    let Some(user) = state.user() else {
        drop(state);
        if localhost_exception(context, command) {
            return Ok(());
        }
        return Err(requires_authentication());
    };
    if let required::Need::All(pairs) = need
        && let Some((target, action)) =
            pairs.iter().find(|(target, action)| !privileges::allows(&user.privileges, target, *action))
    {
        tracing::debug!(connection = context.connection.id, user = %user.name, action = action.name(), ?target, "unauthorized");
        return Err(CommandError::new(
            ErrorCode::Unauthorized,
            format!("not authorized on {} to execute command {}", command.database, command.body),
        ));
    }
    Ok(())
}

/// With `--auth` and no user at all, a client on the loopback interface may create the first
/// user (or role) in `admin` — and, in replica-set mode, initiate the set first (writes wait
/// for it), as mongod's localhost exception allows — and nothing else.
fn localhost_exception(context: &Context, command: &Command) -> bool {
    is_loopback(context.connection.peer)
        && command.database == privileges::ADMIN_DB
        && matches!(command.name.as_str(), "createUser" | "createRole" | "replSetInitiate")
        && !Directory::new(&context.shared.store).has_users()
}

fn is_loopback(peer: SocketAddr) -> bool {
    match peer.ip() {
        std::net::IpAddr::V4(ip) => ip.is_loopback(),
        std::net::IpAddr::V6(ip) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|ip| ip.is_loopback()),
    }
}

/// After a command ran: a write that may have changed users or roles (the user and role
/// commands, or a plain write to `admin.system.users`/`system.roles`, or dropping `admin`)
/// makes every connection re-resolve its privileges.
pub fn after_command(context: &Context, command: &Command) {
    let touches_directory = required::changes_users_or_roles(command);
    if touches_directory {
        context.shared.security.changed();
    }
}

/// The connection-status document of this connection.
pub fn status(context: &Context, show_privileges: bool) -> Document {
    let state = state(context);
    let users: Vec<Bson> = state.user().map(|user| Bson::Document(user.name.to_document())).into_iter().collect();
    let roles: Vec<Bson> = state
        .user()
        .map(|user| user.roles.iter().map(|role| Bson::Document(role.to_document())).collect())
        .unwrap_or_default();
    let mut info = doc! { "authenticatedUsers": users, "authenticatedUserRoles": roles };
    if show_privileges {
        let privileges: Vec<Bson> = state
            .user()
            .map(|user| user.privileges.iter().map(|p| Bson::Document(p.to_document())).collect())
            .unwrap_or_default();
        info.insert("authenticatedUserPrivileges", privileges);
    }
    info
}

/// serverStatus's `security.authentication`, in mongod's shape (plus Strata's `failed`).
pub fn authentication_counters(security: &Security) -> Document {
    let mut mechanisms = Document::new();
    for mechanism in Method::ALL {
        let counters = security.counters.of(mechanism);
        let received = counters.received.load(Relaxed);
        let successful = counters.successful.load(Relaxed);
        mechanisms.insert(
            mechanism.name(),
            doc! { "authenticate": { "received": received as i64, "successful": successful as i64 } },
        );
    }
    doc! { "mechanisms": mechanisms, "failed": security.counters.failed.load(Relaxed) as i64 }
}

/// The warnings a server gives when it starts without access control (each also logged).
pub fn startup_warnings(enabled: bool, listening: SocketAddr) -> Vec<String> {
    if enabled {
        return Vec::new();
    }
    let mut warnings = vec![
        "Access control is not enabled for the database. Read and write access to data and configuration is unrestricted"
            .to_owned(),
    ];
    if !listening.ip().is_loopback() {
        warnings.push(format!(
            "This server listens on {listening}, beyond the loopback interface, without access control: anyone who \
             can reach it can read, change and drop every database. Create a user, then restart with --auth"
        ));
    }
    for warning in &warnings {
        warn!("{warning}");
    }
    warnings
}

/// A fresh per-connection authentication state, for `Context`.
pub fn new_state() -> Mutex<Authentication> {
    Mutex::new(Authentication::default())
}
