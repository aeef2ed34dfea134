//! The command table: one file per command, each exporting `run(&Context, &Command)`.
//!
//! A handler returns the whole reply body (with `ok: 1.0` last, built by `reply`) or a
//! `CommandError`. Handlers never see the wire: framing, compression and `moreToCome` are the
//! connection's business.

use bson::{Bson, Document, RawDocumentBuf};

use crate::command::Command;
use crate::error::CommandError;
use crate::state::Context;

pub mod aggregate;
mod authentication;
mod build_info;
mod coll_mod;
mod coll_stats;
mod compact;
mod configure_fail_point;
mod connection_status;
mod convert_to_capped;
mod count;
mod create;
mod create_backup;
mod create_indexes;
pub mod current_op;
mod db_stats;
mod delete;
mod distinct;
mod drop;
mod drop_database;
mod drop_indexes;
mod explain;
pub mod find;
mod find_and_modify;
mod get_cmd_line_opts;
mod get_log;
mod get_more;
mod get_parameter;
pub mod hello;
mod host_info;
mod insert;
mod kill_cursors;
mod list_collections;
mod list_commands;
mod list_databases;
mod list_indexes;
mod log_rotate;
mod ping;
mod profile;
mod rename_collection;
mod repl_set;
mod roles;
mod rotate_certificates;
mod search_indexes;
mod server_javascript;
mod server_status;
mod sessions;
mod transaction;
mod update;
mod users;
mod validate;
mod whatsmyuri;

pub type Handler = fn(&Context, &Command) -> Result<RawDocumentBuf, CommandError>;

/// One command: its names (the first is canonical) and handler.
pub struct Spec {
    pub names: &'static [&'static str],
    pub help: &'static str,
    pub handler: Handler,
}

pub static COMMANDS: &[Spec] = &[
    Spec { names: &["aggregate"], help: "run an aggregation pipeline", handler: aggregate::run },
    Spec { names: &["collMod"], help: "change a collection's options", handler: coll_mod::run },
    Spec { names: &["collStats"], help: "collection statistics", handler: coll_stats::run },
    Spec { names: &["compact"], help: "give the data file's free space back to the system", handler: compact::run },
    Spec { names: &["count"], help: "count matching documents", handler: count::run },
    Spec { names: &["convertToCapped"], help: "make a collection capped", handler: convert_to_capped::run },
    Spec { names: &["create"], help: "create a collection", handler: create::run },
    Spec { names: &["createBackup"], help: "copy the whole database to a directory, hot", handler: create_backup::run },
    Spec { names: &["createIndexes"], help: "build indexes", handler: create_indexes::run },
    Spec { names: &["dbStats"], help: "database statistics", handler: db_stats::run },
    Spec { names: &["delete"], help: "delete documents", handler: delete::run },
    Spec { names: &["distinct"], help: "distinct values of a field", handler: distinct::run },
    Spec { names: &["drop"], help: "drop a collection", handler: drop::run },
    Spec { names: &["dropDatabase"], help: "drop a database", handler: drop_database::run },
    Spec { names: &["dropIndexes", "deleteIndexes"], help: "drop indexes", handler: drop_indexes::run },
    Spec { names: &["explain"], help: "describe a query plan", handler: explain::run },
    Spec { names: &["find"], help: "query documents", handler: find::run },
    Spec {
        names: &["findAndModify", "findandmodify"],
        help: "update or remove one document and return it",
        handler: find_and_modify::run,
    },
    Spec { names: &["getMore"], help: "next batch of a cursor", handler: get_more::run },
    Spec { names: &["insert"], help: "insert documents", handler: insert::run },
    Spec { names: &["killCursors"], help: "close cursors", handler: kill_cursors::run },
    Spec { names: &["listCollections"], help: "collections of a database", handler: list_collections::run },
    Spec { names: &["listDatabases"], help: "databases", handler: list_databases::run },
    Spec { names: &["listIndexes"], help: "indexes of a collection", handler: list_indexes::run },
    Spec { names: &["renameCollection"], help: "rename a collection", handler: rename_collection::run },
    Spec { names: &["update"], help: "update documents", handler: update::run },
    Spec { names: &["validate"], help: "check a collection's documents and indexes", handler: validate::run },
    Spec { names: &["buildInfo", "buildinfo"], help: "version and build details", handler: build_info::run },
    Spec {
        names: &["connectionStatus"],
        help: "authentication state of this connection",
        handler: connection_status::run,
    },
    Spec { names: &["endSessions"], help: "end logical sessions", handler: sessions::end_sessions },
    Spec { names: &["refreshSessions"], help: "keep logical sessions alive", handler: sessions::refresh_sessions },
    Spec { names: &["killAllSessions"], help: "kill every logical session", handler: sessions::kill_all_sessions },
    Spec { names: &["getCmdLineOpts"], help: "the server's startup options", handler: get_cmd_line_opts::run },
    Spec { names: &["getLog"], help: "recent log lines (none are kept)", handler: get_log::run },
    Spec { names: &["getParameter"], help: "server parameters", handler: get_parameter::run },
    Spec { names: &["hello", "isMaster", "ismaster"], help: "handshake and topology", handler: hello::run },
    Spec { names: &["hostInfo"], help: "the host's system details", handler: host_info::run },
    Spec { names: &["killSessions"], help: "kill logical sessions", handler: sessions::kill_sessions },
    Spec { names: &["listCommands"], help: "this list", handler: list_commands::run },
    Spec { names: &["logRotate"], help: "rotate the log file", handler: log_rotate::run },
    Spec { names: &["ping"], help: "check the server answers", handler: ping::run },
    Spec {
        names: &["mapReduce", "mapreduce"],
        help: "refused: Strata runs no server-side JavaScript (use aggregate)",
        handler: server_javascript::map_reduce,
    },
    Spec { names: &["currentOp"], help: "the commands running now", handler: current_op::current_op },
    Spec { names: &["killOp"], help: "stop a running command", handler: current_op::kill_op },
    Spec { names: &["top"], help: "time spent per collection", handler: current_op::top },
    Spec { names: &["profile"], help: "a database's profiling level, slowms and filter", handler: profile::run },
    Spec { names: &["commitTransaction"], help: "commit a multi-document transaction", handler: transaction::commit },
    Spec { names: &["abortTransaction"], help: "abort a multi-document transaction", handler: transaction::abort },
    Spec {
        names: &["configureFailPoint"],
        help: "test command: make commands fail (enableTestCommands)",
        handler: configure_fail_point::run,
    },
    Spec { names: &["replSetInitiate"], help: "start this replica set", handler: repl_set::initiate },
    Spec { names: &["replSetGetStatus"], help: "the replica set's members and times", handler: repl_set::get_status },
    Spec { names: &["replSetGetConfig"], help: "the replica set's configuration", handler: repl_set::get_config },
    Spec { names: &["replSetReconfig"], help: "change the replica set's members", handler: repl_set::reconfig },
    Spec { names: &["replSetStepDown"], help: "hand the primary role over", handler: repl_set::step_down },
    Spec { names: &["replSetFreeze"], help: "do not stand for election for a while", handler: repl_set::freeze },
    Spec { names: &["replSetRaftJoin"], help: "internal: join a replica set", handler: repl_set::raft_join },
    Spec { names: &["replSetRaftMessage"], help: "internal: consensus messages", handler: repl_set::raft_message },
    Spec { names: &["serverStatus"], help: "server and engine statistics", handler: server_status::run },
    Spec {
        names: &["rotateCertificates"],
        help: "re-read the TLS certificate files",
        handler: rotate_certificates::run,
    },
    Spec { names: &["saslStart"], help: "begin a SASL authentication", handler: authentication::sasl_start },
    Spec { names: &["saslContinue"], help: "continue a SASL authentication", handler: authentication::sasl_continue },
    Spec {
        names: &["authenticate"],
        help: "authenticate by client certificate",
        handler: authentication::authenticate,
    },
    Spec { names: &["logout"], help: "end this connection's authentication", handler: authentication::logout },
    Spec { names: &["createUser"], help: "add a user", handler: users::create_user },
    Spec { names: &["updateUser"], help: "change a user", handler: users::update_user },
    Spec { names: &["dropUser"], help: "remove a user", handler: users::drop_user },
    Spec {
        names: &["dropAllUsersFromDatabase"],
        help: "remove every user of a database",
        handler: users::drop_all_users_from_database,
    },
    Spec { names: &["usersInfo"], help: "describe users", handler: users::users_info },
    Spec { names: &["grantRolesToUser"], help: "give a user roles", handler: users::grant_roles_to_user },
    Spec { names: &["revokeRolesFromUser"], help: "take roles from a user", handler: users::revoke_roles_from_user },
    Spec { names: &["createRole"], help: "define a role", handler: roles::create_role },
    Spec { names: &["updateRole"], help: "change a role", handler: roles::update_role },
    Spec { names: &["dropRole"], help: "remove a role", handler: roles::drop_role },
    Spec {
        names: &["dropAllRolesFromDatabase"],
        help: "remove every role of a database",
        handler: roles::drop_all_roles_from_database,
    },
    Spec { names: &["rolesInfo"], help: "describe roles", handler: roles::roles_info },
    Spec {
        names: &["grantPrivilegesToRole"],
        help: "add privileges to a role",
        handler: roles::grant_privileges_to_role,
    },
    Spec {
        names: &["revokePrivilegesFromRole"],
        help: "remove privileges from a role",
        handler: roles::revoke_privileges_from_role,
    },
    Spec { names: &["grantRolesToRole"], help: "make a role inherit roles", handler: roles::grant_roles_to_role },
    Spec {
        names: &["revokeRolesFromRole"],
        help: "stop a role inheriting roles",
        handler: roles::revoke_roles_from_role,
    },
    Spec {
        names: &["createSearchIndexes"],
        help: "Atlas Search indexes: refused (SearchNotEnabled)",
        handler: search_indexes::run,
    },
    Spec {
        names: &["updateSearchIndex"],
        help: "Atlas Search indexes: refused (SearchNotEnabled)",
        handler: search_indexes::run,
    },
    Spec {
        names: &["dropSearchIndex"],
        help: "Atlas Search indexes: refused (SearchNotEnabled)",
        handler: search_indexes::run,
    },
    Spec { names: &["whatsmyuri"], help: "the client's address as the server sees it", handler: whatsmyuri::run },
];

/// The command named `name` (exact, case-sensitive, as in mongod).
pub fn find(name: &str) -> Option<&'static Spec> {
    COMMANDS.iter().find(|spec| spec.names.contains(&name))
}

/// `fields` with `ok: 1.0` last, as raw bytes.
pub fn reply(fields: Document) -> Result<RawDocumentBuf, CommandError> {
    Ok(RawDocumentBuf::try_from(&wire::ok_reply(fields))?)
}

/// A write command's reply: `{n, ...extra, writeErrors?, ok: 1}` (write errors leave ok at 1).
pub fn write_reply(n: i64, extra: Document, errors: Vec<Document>) -> Result<RawDocumentBuf, CommandError> {
    let mut fields = Document::new();
    fields.insert("n", int(n));
    fields.extend(extra);
    if !errors.is_empty() {
        fields.insert("writeErrors", errors);
    }
    reply(fields)
}

/// The `hint` argument, if any.
pub fn hint(value: Option<&Bson>) -> Result<Option<docstore::Hint>, CommandError> {
    match value {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(pattern)) if pattern.is_empty() => Ok(None),
        Some(value) => Ok(Some(docstore::Hint::from_bson(value)?)),
    }
}

/// One statement's variables: `$$NOW` fixed for the whole command, `$$CLUSTER_TIME` in
/// replica-set mode (the last write's time), and the command's `let`.
pub fn variables(context: &Context, command: &Command) -> Result<docstore::Variables, CommandError> {
    let mut variables = docstore::Variables::new();
    if context.shared.replication.is_some() {
        variables = variables.with_cluster_time(crate::replication::last_write(&context.shared.store));
    }
    match command.optional_document("let")? {
        Some(lets) => Ok(variables.with_let(lets).map_err(docstore::Error::from)?),
        None => Ok(variables),
    }
}

/// A statement's `collation` argument: `Some` also for `{locale: "simple"}`, which overrides a
/// collection's default collation.
pub fn collation(value: Option<&Bson>) -> Result<Option<docstore::Collation>, CommandError> {
    match value {
        None | Some(Bson::Null) => Ok(None),
        Some(value) => Ok(Some(docstore::Collation::parse(value).map_err(docstore::Error::from)?)),
    }
}

/// The `scale` argument of collStats/dbStats (default 1, must be positive).
pub fn scale(command: &Command) -> Result<u64, CommandError> {
    match command.optional_i64("scale")? {
        None => Ok(1),
        Some(scale) if scale > 0 => Ok(scale as u64),
        Some(_) => Err(CommandError::bad_value("Scale factor must be greater than zero")),
    }
}

/// A count as MongoDB sends it: int32 when it fits, else int64.
pub fn int(n: impl TryInto<i64>) -> Bson {
    let n: i64 = n.try_into().unwrap_or(i64::MAX);
    i32::try_from(n).map(Bson::Int32).unwrap_or(Bson::Int64(n))
}
