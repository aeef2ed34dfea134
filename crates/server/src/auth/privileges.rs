//! What a user may do: actions on resources, and the built-in roles that grant them, with
//! MongoDB's names and meanings (the "Built-In Roles" page of the MongoDB manual).
//!
//! A privilege is a set of actions on a resource. A resource is the cluster, every resource,
//! or a namespace pattern: `{db: "", collection: ""}` is every database and every collection
//! that is not a system collection, `{db: "d", collection: ""}` database `d` and its
//! non-system collections, `{db: "", collection: "c"}` collection `c` in every database, and
//! `{db: "d", collection: "c"}` exactly `d.c`. System collections (`system.*`) are reached
//! only by a pattern that names them, as in MongoDB, so `readWrite` on `admin` does not read
//! `admin.system.users`.

use bson::{Bson, Document, doc};

macro_rules! actions {
    ($($variant:ident = $name:literal,)*) => {
        /// One of MongoDB's privilege actions.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Action {
            $($variant,)*
        }

        impl Action {
            pub fn name(self) -> &'static str {
                match self {
                    $(Action::$variant => $name,)*
                }
            }

            pub fn from_name(name: &str) -> Option<Action> {
                match name {
                    $($name => Some(Action::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

// MongoDB's action names, and `createBackup` (Strata's and Percona Server's hot backup, granted
// by `backup`).
actions! {
    BypassDocumentValidation = "bypassDocumentValidation",
    ChangeCustomData = "changeCustomData",
    ChangeOwnCustomData = "changeOwnCustomData",
    ChangeOwnPassword = "changeOwnPassword",
    ChangePassword = "changePassword",
    ChangeStream = "changeStream",
    CollMod = "collMod",
    CollStats = "collStats",
    Compact = "compact",
    ConvertToCapped = "convertToCapped",
    CreateBackup = "createBackup",
    CreateCollection = "createCollection",
    CreateIndex = "createIndex",
    CreateRole = "createRole",
    CreateUser = "createUser",
    DbHash = "dbHash",
    DbStats = "dbStats",
    DropCollection = "dropCollection",
    DropDatabase = "dropDatabase",
    DropIndex = "dropIndex",
    DropRole = "dropRole",
    DropUser = "dropUser",
    EnableProfiler = "enableProfiler",
    Find = "find",
    GetCmdLineOpts = "getCmdLineOpts",
    GetLog = "getLog",
    GetParameter = "getParameter",
    GrantRole = "grantRole",
    HostInfo = "hostInfo",
    IndexStats = "indexStats",
    Inprog = "inprog",
    Insert = "insert",
    KillAnyCursor = "killAnyCursor",
    KillAnySession = "killAnySession",
    KillCursors = "killCursors",
    Killop = "killop",
    ListCollections = "listCollections",
    ListDatabases = "listDatabases",
    ListIndexes = "listIndexes",
    ListSessions = "listSessions",
    LogRotate = "logRotate",
    ReIndex = "reIndex",
    ReplSetConfigure = "replSetConfigure",
    ReplSetGetConfig = "replSetGetConfig",
    ReplSetGetStatus = "replSetGetStatus",
    ReplSetStateChange = "replSetStateChange",
    // Members' own traffic (consensus messages, joining): only the `__system` role has it, the
    // role of `__system@local`, which members authenticate as with the `--keyFile` key.
    Internal = "internal",
    Remove = "remove",
    RenameCollectionSameDB = "renameCollectionSameDB",
    RevokeRole = "revokeRole",
    RotateCertificates = "rotateCertificates",
    ServerStatus = "serverStatus",
    SetParameter = "setParameter",
    Shutdown = "shutdown",
    Top = "top",
    Update = "update",
    Validate = "validate",
    ViewRole = "viewRole",
    ViewUser = "viewUser",
}

/// What a privilege applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resource {
    Cluster,
    /// `{anyResource: true}`: everything, system collections included.
    Any,
    /// A namespace pattern; an empty string matches any name (system collections excepted).
    Namespace {
        db: String,
        collection: String,
    },
}

/// What a command touches, as authorization sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Cluster,
    Database(String),
    Collection(String, String),
}

impl Resource {
    pub fn database(db: &str) -> Resource {
        Resource::Namespace { db: db.to_owned(), collection: String::new() }
    }

    pub fn collection(db: &str, collection: &str) -> Resource {
        Resource::Namespace { db: db.to_owned(), collection: collection.to_owned() }
    }

    pub fn any_database() -> Resource {
        Resource::database("")
    }

    /// True if a privilege on this resource applies to `target`.
    pub fn covers(&self, target: &Target) -> bool {
        match (self, target) {
            (Resource::Any, _) => true,
            (Resource::Cluster, Target::Cluster) => true,
            (Resource::Namespace { db, collection }, Target::Database(target_db)) => {
                collection.is_empty() && (db.is_empty() || db == target_db)
            }
            (Resource::Namespace { db, collection }, Target::Collection(target_db, target_collection)) => {
                let db_matches = db.is_empty() || db == target_db;
                let collection_matches = if collection.is_empty() {
                    !target_collection.starts_with("system.")
                } else {
                    collection == target_collection
                };
                db_matches && collection_matches
            }
            _ => false,
        }
    }

    /// MongoDB's shape: `{cluster: true}`, `{anyResource: true}` or `{db, collection}`.
    pub fn to_document(&self) -> Document {
        match self {
            Resource::Cluster => doc! { "cluster": true },
            Resource::Any => doc! { "anyResource": true },
            Resource::Namespace { db, collection } => doc! { "db": db.clone(), "collection": collection.clone() },
        }
    }

    pub fn from_document(document: &Document) -> Option<Resource> {
        if matches!(document.get_bool("cluster"), Ok(true)) && document.len() == 1 {
            return Some(Resource::Cluster);
        }
        if matches!(document.get_bool("anyResource"), Ok(true)) && document.len() == 1 {
            return Some(Resource::Any);
        }
        match (document.get_str("db"), document.get_str("collection"), document.len()) {
            (Ok(db), Ok(collection), 2) => Some(Resource::collection(db, collection)),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Privilege {
    pub resource: Resource,
    pub actions: Vec<Action>,
}

impl Privilege {
    pub fn new(resource: Resource, actions: &[Action]) -> Privilege {
        Privilege { resource, actions: actions.to_vec() }
    }

    pub fn to_document(&self) -> Document {
        let actions: Vec<Bson> = self.actions.iter().map(|action| Bson::String(action.name().to_owned())).collect();
        doc! { "resource": self.resource.to_document(), "actions": actions }
    }
}

/// True if `privileges` allow `action` on `target`.
pub fn allows(privileges: &[Privilege], target: &Target, action: Action) -> bool {
    privileges.iter().any(|privilege| privilege.actions.contains(&action) && privilege.resource.covers(target))
}

use Action::*;

const READ: &[Action] = &[ChangeStream, CollStats, DbHash, DbStats, Find, KillCursors, ListCollections, ListIndexes];
const WRITE: &[Action] = &[
    ConvertToCapped,
    CreateCollection,
    CreateIndex,
    DropCollection,
    DropIndex,
    Insert,
    Remove,
    RenameCollectionSameDB,
    Update,
];
const DB_ADMIN: &[Action] = &[
    BypassDocumentValidation,
    CollMod,
    CollStats,
    Compact,
    ConvertToCapped,
    CreateCollection,
    CreateIndex,
    DbHash,
    DbStats,
    DropCollection,
    DropDatabase,
    DropIndex,
    EnableProfiler,
    IndexStats,
    ListCollections,
    ListIndexes,
    ReIndex,
    RenameCollectionSameDB,
    Validate,
];
/// What `dbAdmin` may do with the profiler's collection.
const DB_ADMIN_PROFILE: &[Action] = &[CollStats, DbHash, DbStats, Find, KillCursors, ListCollections, ListIndexes];
const USER_ADMIN: &[Action] = &[
    ChangeCustomData,
    ChangePassword,
    CreateRole,
    CreateUser,
    DropRole,
    DropUser,
    GrantRole,
    RevokeRole,
    ViewRole,
    ViewUser,
];
const CLUSTER_MONITOR: &[Action] = &[
    GetCmdLineOpts,
    GetLog,
    GetParameter,
    HostInfo,
    Inprog,
    ListDatabases,
    ListSessions,
    ReplSetGetConfig,
    ReplSetGetStatus,
    ServerStatus,
    Top,
];
const CLUSTER_MONITOR_ANY_DB: &[Action] = &[CollStats, DbHash, DbStats, IndexStats];
const CLUSTER_MANAGER_AND_HOST: &[Action] = &[
    KillAnyCursor,
    KillAnySession,
    Killop,
    LogRotate,
    ReplSetConfigure,
    ReplSetStateChange,
    RotateCertificates,
    SetParameter,
    Shutdown,
];
/// The collections where users and roles live (in `admin`).
pub const USERS_COLLECTION: &str = "system.users";
pub const ROLES_COLLECTION: &str = "system.roles";
pub const ADMIN_DB: &str = "admin";

/// The names of the built-in roles every database has.
pub const DATABASE_ROLES: &[&str] = &["read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"];
/// The names of the built-in roles that exist only in `admin`.
pub const ADMIN_ROLES: &[&str] = &[
    "clusterMonitor",
    "clusterAdmin",
    "backup",
    "restore",
    "readAnyDatabase",
    "readWriteAnyDatabase",
    "userAdminAnyDatabase",
    "dbAdminAnyDatabase",
    "root",
    // The members' own role (`__system@local`, `--keyFile`): root's privileges and `internal`.
    "__system",
];

/// True if `role` is a built-in role of database `db`.
pub fn is_builtin(role: &str, db: &str) -> bool {
    DATABASE_ROLES.contains(&role) || (db == ADMIN_DB && ADMIN_ROLES.contains(&role))
}

/// The privileges of built-in role `role` of database `db`, or `None` if there is no such
/// built-in role.
pub fn builtin_privileges(role: &str, db: &str) -> Option<Vec<Privilege>> {
    if !is_builtin(role, db) {
        return None;
    }
    let on_db = Resource::database(db);
    let any_db = Resource::any_database();
    let users = Resource::collection(ADMIN_DB, USERS_COLLECTION);
    let roles = Resource::collection(ADMIN_DB, ROLES_COLLECTION);
    let privileges = match role {
        "read" => vec![Privilege::new(on_db, READ)],
        "readWrite" => vec![Privilege::new(on_db, &[READ, WRITE].concat())],
        "dbAdmin" => vec![
            Privilege::new(on_db, DB_ADMIN),
            Privilege::new(Resource::collection(db, "system.profile"), DB_ADMIN_PROFILE),
        ],
        "userAdmin" => vec![Privilege::new(on_db, USER_ADMIN)],
        "dbOwner" => ["readWrite", "dbAdmin", "userAdmin"]
            .iter()
            .flat_map(|role| builtin_privileges(role, db).unwrap_or_default())
            .collect(),
        "clusterMonitor" => {
            vec![Privilege::new(Resource::Cluster, CLUSTER_MONITOR), Privilege::new(any_db, CLUSTER_MONITOR_ANY_DB)]
        }
        "clusterAdmin" => vec![
            Privilege::new(Resource::Cluster, &[CLUSTER_MONITOR, CLUSTER_MANAGER_AND_HOST].concat()),
            Privilege::new(any_db, &[CLUSTER_MONITOR_ANY_DB, &[DropDatabase, KillCursors]].concat()),
        ],
        "backup" => vec![
            Privilege::new(Resource::Cluster, &[CreateBackup, GetParameter, ListDatabases, ServerStatus]),
            Privilege::new(any_db, &[CollStats, DbHash, DbStats, Find, ListCollections, ListIndexes]),
            Privilege::new(users, &[Find]),
            Privilege::new(roles, &[Find]),
        ],
        "restore" => vec![
            Privilege::new(Resource::Cluster, &[GetParameter, ListDatabases]),
            Privilege::new(
                any_db,
                &[
                    BypassDocumentValidation,
                    ChangeCustomData,
                    ChangePassword,
                    CollMod,
                    ConvertToCapped,
                    CreateCollection,
                    CreateIndex,
                    CreateRole,
                    CreateUser,
                    DropCollection,
                    DropRole,
                    DropUser,
                    GrantRole,
                    Insert,
                    ListCollections,
                    RevokeRole,
                    ViewRole,
                    ViewUser,
                ],
            ),
            Privilege::new(users, &[CreateCollection, CreateIndex, DropCollection, Find, Insert, Remove, Update]),
            Privilege::new(roles, &[CreateCollection, CreateIndex, DropCollection, Find, Insert, Remove, Update]),
        ],
        "readAnyDatabase" => vec![Privilege::new(Resource::Cluster, &[ListDatabases]), Privilege::new(any_db, READ)],
        "readWriteAnyDatabase" => {
            vec![Privilege::new(Resource::Cluster, &[ListDatabases]), Privilege::new(any_db, &[READ, WRITE].concat())]
        }
        "userAdminAnyDatabase" => vec![
            Privilege::new(Resource::Cluster, &[ListDatabases]),
            Privilege::new(any_db, USER_ADMIN),
            Privilege::new(users, &[CollStats, DropIndex, Find]),
            Privilege::new(roles, &[CollStats, CreateIndex, DropIndex, Find]),
        ],
        "dbAdminAnyDatabase" => vec![
            Privilege::new(Resource::Cluster, &[ListDatabases]),
            Privilege::new(any_db, DB_ADMIN),
            Privilege::new(Resource::collection("", "system.profile"), DB_ADMIN_PROFILE),
        ],
        "root" => {
            ["readWriteAnyDatabase", "dbAdminAnyDatabase", "userAdminAnyDatabase", "clusterAdmin", "restore", "backup"]
                .iter()
                .flat_map(|role| builtin_privileges(role, ADMIN_DB).unwrap_or_default())
                .collect()
        }
        "__system" => {
            let mut privileges = builtin_privileges("root", ADMIN_DB).unwrap_or_default();
            privileges.push(Privilege::new(Resource::Cluster, &[Internal]));
            privileges
        }
        _ => return None,
    };
    Some(privileges)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collection(db: &str, name: &str) -> Target {
        Target::Collection(db.to_owned(), name.to_owned())
    }

    #[test]
    fn resource_patterns() {
        let on_test = Resource::database("test");
        assert!(on_test.covers(&collection("test", "c")));
        assert!(on_test.covers(&Target::Database("test".into())));
        assert!(!on_test.covers(&collection("other", "c")));
        assert!(!on_test.covers(&collection("test", "system.users")));
        assert!(!on_test.covers(&Target::Cluster));
        assert!(Resource::any_database().covers(&collection("x", "y")));
        assert!(!Resource::any_database().covers(&collection("admin", "system.users")));
        assert!(Resource::collection("", "c").covers(&collection("any", "c")));
        assert!(!Resource::collection("", "c").covers(&Target::Database("any".into())));
        assert!(Resource::collection("admin", "system.users").covers(&collection("admin", "system.users")));
        assert!(Resource::Any.covers(&collection("admin", "system.users")));
        assert!(Resource::Cluster.covers(&Target::Cluster));
        for resource in [Resource::Cluster, Resource::Any, Resource::collection("a", "")] {
            assert_eq!(Resource::from_document(&resource.to_document()), Some(resource));
        }
    }

    /// Goal: the built-in roles mean what MongoDB's manual says, on the points users rely on.
    #[test]
    fn builtin_roles() {
        let read = builtin_privileges("read", "test").unwrap();
        assert!(allows(&read, &collection("test", "c"), Find));
        assert!(!allows(&read, &collection("test", "c"), Insert));
        assert!(!allows(&read, &collection("other", "c"), Find));
        let db_admin = builtin_privileges("dbAdmin", "test").unwrap();
        assert!(!allows(&db_admin, &collection("test", "c"), Find), "dbAdmin does not read data");
        assert!(allows(&db_admin, &Target::Database("test".into()), DropDatabase));
        let owner = builtin_privileges("dbOwner", "test").unwrap();
        assert!(
            allows(&owner, &collection("test", "c"), Insert)
                && allows(&owner, &Target::Database("test".into()), CreateUser)
        );
        assert!(builtin_privileges("root", "test").is_none(), "root exists only in admin");
        let root = builtin_privileges("root", "admin").unwrap();
        assert!(allows(&root, &collection("any", "c"), Update));
        assert!(allows(&root, &collection("admin", "system.users"), Find));
        assert!(allows(&root, &Target::Cluster, Shutdown));
        let monitor = builtin_privileges("clusterMonitor", "admin").unwrap();
        assert!(allows(&monitor, &Target::Cluster, ServerStatus));
        assert!(!allows(&monitor, &collection("test", "c"), Find));
        let read_any = builtin_privileges("readAnyDatabase", "admin").unwrap();
        assert!(allows(&read_any, &collection("x", "y"), Find));
        assert!(!allows(&read_any, &collection("admin", "system.users"), Find));
        for name in ADMIN_ROLES.iter().chain(DATABASE_ROLES) {
            assert!(builtin_privileges(name, "admin").is_some(), "{name}");
        }
    }
}
