//! `buildInfo`: the version drivers and mongosh read. "7.0.0" matches `maxWireVersion` 21.

use bson::{RawDocumentBuf, doc};

use crate::command::Command;
use crate::commands::reply;
use crate::error::CommandError;
use crate::state::Context;

pub const VERSION: &str = "7.0.0";

pub fn run(_context: &Context, _command: &Command) -> Result<RawDocumentBuf, CommandError> {
    reply(doc! {
        "version": VERSION,
        "gitVersion": "strata",
        "versionArray": [7, 0, 0, 0],
        "strataVersion": env!("CARGO_PKG_VERSION"),
        "bits": 64,
        "debug": cfg!(debug_assertions),
        "maxBsonObjectSize": wire::limits::MAX_DOCUMENT_SIZE_BYTES as i32,
        "storageEngines": ["strata"],
        "javascriptEngine": "none",
        "modules": [],
        "allocator": "system",
        "sysInfo": "deprecated",
        "openssl": { "running": "disabled", "compiled": "disabled" },
        "buildEnvironment": { "target_arch": std::env::consts::ARCH, "target_os": std::env::consts::OS },
    })
}
