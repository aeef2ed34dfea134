//! What each command needs to run, as privilege actions on resources: the rule table of
//! authorization. Every command in the command table has a rule here (a test checks); a
//! command without one is refused, so a new command cannot slip through unchecked.

use bson::{Bson, Document};

use crate::auth::privileges::{ADMIN_DB, Action, ROLES_COLLECTION, Target, USERS_COLLECTION};
use crate::auth::users::{RoleName, UserName};
use crate::command::Command;
use crate::error::CommandError;

/// What a command needs.
#[derive(Debug, PartialEq)]
pub enum Need {
    /// Runs before authentication: the handshake, authentication itself, a few harmless
    /// commands that reveal nothing stored.
    Nothing,
    /// Any authenticated user (the handler checks what is theirs, e.g. a cursor's owner).
    Authenticated,
    /// Every action on its target.
    All(Vec<(Target, Action)>),
}

use Action::*;

/// The rule for `command`; `current` is the connection's user (some commands are allowed on
/// one's own user).
pub fn need(command: &Command, current: Option<&UserName>) -> Result<Need, CommandError> {
    let db = command.database.as_str();
    let on_collection =
        |actions: &[Action]| Need::All(actions.iter().map(|a| (collection_target(command), *a)).collect());
    let on_db = |actions: &[Action]| Need::All(actions.iter().map(|a| (database(db), *a)).collect());
    let on_cluster = |action: Action| Need::All(vec![(Target::Cluster, action)]);
    Ok(match command.name.as_str() {
        "hello" | "isMaster" | "ismaster" | "buildInfo" | "buildinfo" | "ping" | "saslStart" | "saslContinue"
        | "authenticate" | "logout" | "connectionStatus" | "whatsmyuri" => Need::Nothing,
        "listCommands" | "endSessions" | "killSessions" | "refreshSessions" | "getMore" | "killCursors"
        | "listDatabases" | "commitTransaction" | "abortTransaction" | "mapReduce" | "mapreduce" => Need::Authenticated,
        "find" | "count" | "distinct" => on_collection(&[Find]),
        "insert" => on_collection(&[Insert]),
        "delete" => on_collection(&[Remove]),
        "update" => on_collection(if any_upsert(command, "updates") { &[Update, Insert] } else { &[Update] }),
        "findAndModify" | "findandmodify" => on_collection(&find_and_modify_actions(&command.body)),
        "aggregate" => Need::All(aggregate_needs(command)),
        "explain" => explain_need(command, current)?,
        "create" => on_collection(&[CreateCollection]),
        "convertToCapped" => on_collection(&[ConvertToCapped]),
        "createIndexes" | "createSearchIndexes" | "updateSearchIndex" => on_collection(&[CreateIndex]),
        "drop" => on_collection(&[DropCollection]),
        "dropIndexes" | "deleteIndexes" | "dropSearchIndex" => on_collection(&[DropIndex]),
        "listIndexes" => on_collection(&[ListIndexes]),
        "collStats" => on_collection(&[CollStats]),
        "collMod" => on_collection(&[CollMod]),
        "validate" => on_collection(&[Validate]),
        "compact" => on_collection(&[Compact]),
        "dbStats" => on_db(&[DbStats]),
        "dropDatabase" => on_db(&[DropDatabase]),
        "listCollections" => list_collections_need(command),
        "renameCollection" => Need::All(rename_needs(command)),
        "serverStatus" => on_cluster(ServerStatus),
        "currentOp" if matches!(command.get("$ownOps"), Some(Bson::Boolean(true))) => Need::Authenticated,
        "currentOp" => on_cluster(Inprog),
        "killOp" => on_cluster(Killop),
        "top" => on_cluster(Top),
        "profile" => on_db(&[EnableProfiler]),
        "killAllSessions" => on_cluster(KillAnySession),
        "configureFailPoint" => on_cluster(SetParameter),
        "replSetInitiate" | "replSetReconfig" => on_cluster(ReplSetConfigure),
        "replSetStepDown" | "replSetFreeze" => on_cluster(ReplSetStateChange),
        "replSetRaftMessage" | "replSetRaftJoin" => on_cluster(Internal),
        "replSetGetStatus" => on_cluster(ReplSetGetStatus),
        "replSetGetConfig" => on_cluster(ReplSetGetConfig),
        "hostInfo" => on_cluster(HostInfo),
        "getCmdLineOpts" => on_cluster(GetCmdLineOpts),
        "getLog" => on_cluster(GetLog),
        "getParameter" => on_cluster(GetParameter),
        "rotateCertificates" => on_cluster(RotateCertificates),
        "logRotate" => on_cluster(LogRotate),
        "createBackup" => on_cluster(CreateBackup),
        "createUser" => Need::All(with_roles(command, "roles", (database(db), CreateUser), GrantRole)?),
        "updateUser" => Need::All(update_user_needs(command, current)?),
        "dropUser" | "dropAllUsersFromDatabase" => on_db(&[DropUser]),
        "usersInfo" => users_info_need(command, current),
        "grantRolesToUser" => Need::All(role_needs(command, GrantRole)?),
        "revokeRolesFromUser" => Need::All(role_needs(command, RevokeRole)?),
        "createRole" => Need::All(with_roles(command, "roles", (database(db), CreateRole), GrantRole)?),
        "updateRole" => on_db(&[GrantRole, RevokeRole]),
        "dropRole" | "dropAllRolesFromDatabase" => on_db(&[DropRole]),
        "rolesInfo" => on_db(&[ViewRole]),
        "grantPrivilegesToRole" | "grantRolesToRole" => on_db(&[GrantRole]),
        "revokePrivilegesFromRole" | "revokeRolesFromRole" => on_db(&[RevokeRole]),
        other => return Err(CommandError::internal(format!("no authorization rule for command {other}"))),
    })
}

fn database(db: &str) -> Target {
    Target::Database(db.to_owned())
}

/// The collection a command names in its first field; a command whose first field is not a
/// collection name is checked against the whole database (its handler reports the bad name).
fn collection_target(command: &Command) -> Target {
    match command.argument() {
        Some(Bson::String(name)) if !name.is_empty() => Target::Collection(command.database.clone(), name.clone()),
        _ => database(&command.database),
    }
}

/// True if any statement of an update (body array or document sequence) is an upsert.
fn any_upsert(command: &Command, field: &str) -> bool {
    let in_body = match command.get(field) {
        Some(Bson::Array(statements)) => {
            statements.iter().any(|s| s.as_document().is_some_and(|s| matches!(s.get_bool("upsert"), Ok(true))))
        }
        _ => false,
    };
    let in_sequence = command
        .sequences
        .iter()
        .filter(|(identifier, _)| identifier == field)
        .flat_map(|(_, documents)| documents)
        .any(|statement| matches!(statement.get_bool("upsert"), Ok(true)));
    in_body || in_sequence
}

fn find_and_modify_actions(body: &Document) -> Vec<Action> {
    if matches!(body.get_bool("remove"), Ok(true)) {
        vec![Find, Remove]
    } else if matches!(body.get_bool("upsert"), Ok(true)) {
        vec![Find, Update, Insert]
    } else {
        vec![Find, Update]
    }
}

/// `aggregate`: find on the source (unless `aggregate: 1`), and what each stage reaches.
fn aggregate_needs(command: &Command) -> Vec<(Target, Action)> {
    let mut needs = Vec::new();
    if matches!(command.argument(), Some(Bson::String(_))) {
        needs.push((collection_target(command), Find));
    }
    // A change stream reads the collection's (or, with `aggregate: 1`, the database's) changes.
    let first = match command.get("pipeline") {
        Some(Bson::Array(stages)) => stages.first().and_then(Bson::as_document),
        _ => None,
    };
    if first.is_some_and(|stage| stage.contains_key("$changeStream")) {
        needs.push((collection_target(command), Find));
        needs.push((collection_target(command), ChangeStream));
    }
    // `$collStats` reads the collection's statistics, as the collStats command does.
    if first.is_some_and(|stage| stage.contains_key("$collStats")) {
        needs.push((collection_target(command), CollStats));
    }
    if first.is_some_and(|stage| stage.contains_key("$indexStats")) {
        needs.push((collection_target(command), IndexStats));
    }
    if let Some(Bson::Array(stages)) = command.get("pipeline") {
        stage_needs(&command.database, stages, &mut needs);
    }
    needs
}

fn stage_needs(db: &str, stages: &[Bson], needs: &mut Vec<(Target, Action)>) {
    for stage in stages.iter().filter_map(Bson::as_document) {
        let Some((name, spec)) = stage.iter().next() else { continue };
        let named = |value: Option<&Bson>| namespace_of(db, value);
        match name.as_str() {
            "$out" => push_all(needs, named(Some(spec)), &[Insert, Remove]),
            "$merge" => {
                let into = spec.as_document().and_then(|spec| spec.get("into")).or(Some(spec));
                push_all(needs, named(into), &[Insert, Update]);
            }
            "$lookup" | "$graphLookup" => {
                let from = spec.as_document().and_then(|spec| spec.get("from"));
                if from.is_some() {
                    push_all(needs, named(from), &[Find]);
                }
                if let Some(Ok(pipeline)) = spec.as_document().map(|spec| spec.get_array("pipeline")) {
                    stage_needs(db, pipeline, needs);
                }
            }
            "$unionWith" => {
                let coll = spec.as_document().and_then(|spec| spec.get("coll")).or(Some(spec));
                push_all(needs, named(coll), &[Find]);
                if let Some(Ok(pipeline)) = spec.as_document().map(|spec| spec.get_array("pipeline")) {
                    stage_needs(db, pipeline, needs);
                }
            }
            "$facet" => {
                for pipeline in spec.as_document().into_iter().flat_map(|spec| spec.values()) {
                    if let Bson::Array(pipeline) = pipeline {
                        stage_needs(db, pipeline, needs);
                    }
                }
            }
            "$currentOp" => needs.push((Target::Cluster, Inprog)),
            "$listLocalSessions" | "$listSessions" => needs.push((Target::Cluster, ListSessions)),
            _ => {}
        }
    }
}

/// A stage's target namespace: "coll" (this database) or `{db, coll}`.
fn namespace_of(db: &str, value: Option<&Bson>) -> Target {
    match value {
        Some(Bson::String(coll)) => Target::Collection(db.to_owned(), coll.clone()),
        Some(Bson::Document(spec)) => match (spec.get_str("db"), spec.get_str("coll")) {
            (Ok(other_db), Ok(coll)) => Target::Collection(other_db.to_owned(), coll.to_owned()),
            (Err(_), Ok(coll)) => Target::Collection(db.to_owned(), coll.to_owned()),
            _ => database(db),
        },
        _ => database(db),
    }
}

fn push_all(needs: &mut Vec<(Target, Action)>, target: Target, actions: &[Action]) {
    needs.extend(actions.iter().map(|action| (target.clone(), *action)));
}

/// `explain` needs what the explained command needs.
fn explain_need(command: &Command, current: Option<&UserName>) -> Result<Need, CommandError> {
    match command.get("explain") {
        Some(Bson::Document(inner)) if !inner.is_empty() => {
            let inner = Command::from_document(inner.clone(), command.database.clone())?;
            if inner.name == "explain" {
                return Ok(Need::All(vec![(database(&command.database), Find)]));
            }
            need(&inner, current)
        }
        _ => Ok(Need::All(vec![(database(&command.database), Find)])),
    }
}

/// Listing collections by name only, restricted to those the user may reach
/// (`authorizedCollections`), needs no privilege of its own; the handler filters.
fn list_collections_need(command: &Command) -> Need {
    let flag = |field: &str| matches!(command.body.get_bool(field), Ok(true));
    if flag("authorizedCollections") && flag("nameOnly") {
        Need::Authenticated
    } else {
        Need::All(vec![(database(&command.database), ListCollections)])
    }
}

fn rename_needs(command: &Command) -> Vec<(Target, Action)> {
    let split = |value: Option<&Bson>| -> Target {
        match value.and_then(Bson::as_str).and_then(|ns| ns.split_once('.')) {
            Some((db, coll)) => Target::Collection(db.to_owned(), coll.to_owned()),
            None => database(ADMIN_DB),
        }
    };
    let (from, to) = (split(command.argument()), split(command.get("to")));
    let same_db = matches!((&from, &to), (Target::Collection(a, _), Target::Collection(b, _)) if a == b);
    let mut needs = Vec::new();
    if same_db {
        push_all(&mut needs, from, &[RenameCollectionSameDB]);
        push_all(&mut needs, to.clone(), &[RenameCollectionSameDB]);
    } else {
        push_all(&mut needs, from, &[Find, DropCollection]);
        push_all(&mut needs, to.clone(), &[Insert, CreateCollection, CreateIndex]);
    }
    if matches!(command.body.get_bool("dropTarget"), Ok(true)) {
        push_all(&mut needs, to, &[DropCollection]);
    }
    needs
}

/// `base`, plus `action` on the database of every role the command lists in `field`.
fn with_roles(
    command: &Command,
    field: &str,
    base: (Target, Action),
    action: Action,
) -> Result<Vec<(Target, Action)>, CommandError> {
    let mut needs = vec![base];
    if command.get(field).is_some() {
        let roles = RoleName::parse_list(command.get(field), field, &command.database)?;
        needs.extend(roles.iter().map(|role| (database(&role.db), action)));
    }
    Ok(needs)
}

fn role_needs(command: &Command, action: Action) -> Result<Vec<(Target, Action)>, CommandError> {
    let roles = RoleName::parse_list(command.get("roles"), "roles", &command.database)?;
    Ok(roles.iter().map(|role| (database(&role.db), action)).collect())
}

fn update_user_needs(command: &Command, current: Option<&UserName>) -> Result<Vec<(Target, Action)>, CommandError> {
    let db = database(&command.database);
    let own = match (command.argument(), current) {
        (Some(Bson::String(user)), Some(current)) => current.user == *user && current.db == command.database,
        _ => false,
    };
    let mut needs = Vec::new();
    if command.get("pwd").is_some() || command.get("mechanisms").is_some() {
        needs.push((db.clone(), if own { ChangeOwnPassword } else { ChangePassword }));
    }
    if command.get("customData").is_some() {
        needs.push((db.clone(), if own { ChangeOwnCustomData } else { ChangeCustomData }));
    }
    if command.get("roles").is_some() {
        needs.extend(with_roles(command, "roles", (db, RevokeRole), GrantRole)?);
    }
    if needs.is_empty() {
        needs.push((database(&command.database), ChangePassword));
    }
    Ok(needs)
}

/// `usersInfo` about oneself needs nothing; about others, `viewUser` on their databases.
fn users_info_need(command: &Command, current: Option<&UserName>) -> Need {
    let db = command.database.as_str();
    let asked: Vec<Option<UserName>> = match command.argument() {
        Some(Bson::String(user)) => vec![Some(UserName::new(user, db))],
        Some(Bson::Document(spec)) if matches!(spec.get_bool("forAllDBs"), Ok(true)) => {
            return Need::All(vec![(database(""), ViewUser)]);
        }
        Some(Bson::Document(spec)) => vec![user_spec(spec, db)],
        Some(Bson::Array(items)) => items
            .iter()
            .map(|item| match item {
                Bson::String(user) => Some(UserName::new(user, db)),
                Bson::Document(spec) => user_spec(spec, db),
                _ => None,
            })
            .collect(),
        _ => vec![None],
    };
    if !asked.is_empty() && asked.iter().all(|name| name.is_some() && name.as_ref() == current) {
        return Need::Authenticated;
    }
    let mut needs: Vec<(Target, Action)> =
        asked.iter().map(|name| (database(name.as_ref().map_or(db, |name| name.db.as_str())), ViewUser)).collect();
    needs.dedup();
    Need::All(needs)
}

fn user_spec(spec: &Document, default_db: &str) -> Option<UserName> {
    Some(UserName::new(spec.get_str("user").ok()?, spec.get_str("db").unwrap_or(default_db)))
}

/// The commands that change users or roles.
pub const USER_AND_ROLE_COMMANDS: &[&str] = &[
    "createUser",
    "updateUser",
    "dropUser",
    "dropAllUsersFromDatabase",
    "grantRolesToUser",
    "revokeRolesFromUser",
    "createRole",
    "updateRole",
    "dropRole",
    "dropAllRolesFromDatabase",
    "grantPrivilegesToRole",
    "revokePrivilegesFromRole",
    "grantRolesToRole",
    "revokeRolesFromRole",
];

/// True if `command` may have changed a user or a role.
pub fn changes_users_or_roles(command: &Command) -> bool {
    let user_or_role_command =
        USER_AND_ROLE_COMMANDS.contains(&command.name.as_str()) || command.name == "renameCollection";
    let on_directory = command.database == ADMIN_DB
        && (command.name == "dropDatabase"
            || matches!(command.argument(), Some(Bson::String(name)) if name == USERS_COLLECTION || name == ROLES_COLLECTION));
    user_or_role_command || on_directory
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn command(body: Document) -> Command {
        Command::from_document(body, "test".into()).unwrap()
    }

    /// Goal: no command in the table lacks an authorization rule.
    #[test]
    fn every_command_has_a_rule() {
        for spec in crate::commands::COMMANDS {
            for name in spec.names {
                // A rule may refuse malformed arguments; it must not be missing.
                let result = need(&command(doc! { *name: "c" }), None);
                assert!(result.as_ref().map_or_else(|e| e.code.number() != 1, |_| true), "{name}: {result:?}");
            }
        }
    }

    #[test]
    fn aggregate_reaches_every_namespace_it_touches() {
        let needs = aggregate_needs(&command(doc! {
            "aggregate": "a",
            "pipeline": [
                { "$lookup": { "from": "b", "as": "x", "pipeline": [{ "$unionWith": "c" }] } },
                { "$out": { "db": "other", "coll": "d" } },
            ],
        }));
        let target = |db: &str, c: &str| Target::Collection(db.into(), c.into());
        assert!(needs.contains(&(target("test", "a"), Find)));
        assert!(needs.contains(&(target("test", "b"), Find)));
        assert!(needs.contains(&(target("test", "c"), Find)));
        assert!(needs.contains(&(target("other", "d"), Insert)));
    }

    #[test]
    fn own_user_needs_less() {
        let ann = UserName::new("ann", "test");
        assert_eq!(need(&command(doc! { "usersInfo": "ann" }), Some(&ann)).unwrap(), Need::Authenticated);
        assert_ne!(need(&command(doc! { "usersInfo": "bob" }), Some(&ann)).unwrap(), Need::Authenticated);
        let own = need(&command(doc! { "updateUser": "ann", "pwd": "x" }), Some(&ann)).unwrap();
        assert_eq!(own, Need::All(vec![(database("test"), ChangeOwnPassword)]));
    }
}
