//! Which log a store follows: its own embedded log, or a NATS JetStream stream shared with other
//! hosts. The projections stay in the store directory either way. The NATS client is built only with
//! the `nats` cargo feature; without it a NATS location is refused with an error that says so.

use std::path::Path;
use std::sync::Arc;

use mnemo_log::{Clock, FjallLog, LogBackend};
#[cfg(feature = "nats")]
use mnemo_log_nats::{DEFAULT_STREAM_NAME, NatsLog, NatsOptions};

use crate::error::Error;

/// The file in a store directory that names the log its projections were folded from.
pub const LOG_SOURCE_FILE_NAME: &str = "log-source";

/// Where a store's log is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LogLocation {
    /// The embedded fjall log in the store directory.
    #[default]
    Local,
    /// A JetStream stream on a NATS cluster, shared by every host that names it.
    Nats {
        /// Comma-separated `nats://HOST:PORT` servers.
        servers: String,
        /// The JetStream stream holding the log.
        stream: String,
    },
}

impl LogLocation {
    /// Parses `local`, or `nats://HOST:PORT[,nats://HOST:PORT...][/STREAM]` (the stream defaults to
    /// `MNEMO`).
    pub fn parse(text: &str) -> Result<LogLocation, Error> {
        let text = text.trim();
        if text == "local" {
            return Ok(LogLocation::Local);
        }
        if !text.starts_with("nats://") {
            return Err(Error::InvalidInput(format!(
                "log location {text:?}: expected `local` or nats://HOST:PORT[,nats://HOST:PORT...][/STREAM]"
            )));
        }
        parse_nats(text)
    }

    /// What the store directory records of the location: the stream, not the servers (hosts may reach
    /// one cluster through different addresses).
    fn source_tag(&self) -> String {
        match self {
            LogLocation::Local => "local".to_owned(),
            LogLocation::Nats { stream, .. } => format!("nats:{stream}"),
        }
    }
}

impl std::fmt::Display for LogLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogLocation::Local => f.write_str("local"),
            LogLocation::Nats { servers, stream } => write!(f, "{servers}/{stream}"),
        }
    }
}

/// Parses `nats://HOST:PORT[,nats://HOST:PORT...][/STREAM]`.
#[cfg(feature = "nats")]
fn parse_nats(text: &str) -> Result<LogLocation, Error> {
    let (servers, stream) = match text.rsplit_once('/') {
        Some((servers, stream)) if !stream.contains(':') && servers.len() > "nats:/".len() => {
            (servers, if stream.is_empty() { DEFAULT_STREAM_NAME } else { stream })
        }
        _ => (text, DEFAULT_STREAM_NAME),
    };
    let options =
        NatsOptions::new(servers, stream).map_err(|e| Error::InvalidInput(format!("log location: {e}")))?;
    Ok(LogLocation::Nats { servers: options.servers.join(","), stream: options.stream })
}

/// Without the NATS client no NATS location can be followed.
#[cfg(not(feature = "nats"))]
fn parse_nats(text: &str) -> Result<LogLocation, Error> {
    Err(no_nats_client(text))
}

/// The refusal of a NATS location by a build without the NATS client.
#[cfg(not(feature = "nats"))]
fn no_nats_client(location: &str) -> Error {
    Error::InvalidInput(format!(
        "log location {location:?}: this build of mnemo has no NATS client (its `nats` feature is off)"
    ))
}

/// Opens the log `location` names for the store whose local database is `local`, after checking
/// that the store's projections were folded from that log.
pub(crate) fn open_log(
    location: &LogLocation,
    local: &Arc<FjallLog>,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn LogBackend>, Error> {
    match location {
        LogLocation::Local => {
            bind(local.dir(), location, local.head().0)?;
            Ok(Arc::clone(local) as Arc<dyn LogBackend>)
        }
        LogLocation::Nats { servers, stream } => open_nats(location, servers, stream, local, clock),
    }
}

#[cfg(feature = "nats")]
fn open_nats(
    location: &LogLocation,
    servers: &str,
    stream: &str,
    local: &Arc<FjallLog>,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn LogBackend>, Error> {
    bind(local.dir(), location, local.head().0)?;
    let mut options = NatsOptions::new(servers, stream).map_err(|e| Error::InvalidInput(e.to_string()))?;
    options.clock = clock;
    options.key_rules_of = Some(mnemo_core::key_rules_of_encoded);
    Ok(Arc::new(NatsLog::open(options)?))
}

/// Refused before the store is bound to a log this build cannot follow.
#[cfg(not(feature = "nats"))]
fn open_nats(
    location: &LogLocation,
    _servers: &str,
    _stream: &str,
    _local: &Arc<FjallLog>,
    _clock: Arc<dyn Clock>,
) -> Result<Arc<dyn LogBackend>, Error> {
    Err(no_nats_client(&location.to_string()))
}

/// Largest log-source file read, in bytes (it holds one log location).
const LOG_SOURCE_BYTES_MAX: u64 = 4096;

/// The log-source file, read through [`LOG_SOURCE_BYTES_MAX`]: a larger one is not Mnemo's.
fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)?.take(LOG_SOURCE_BYTES_MAX + 1).read_to_string(&mut text)?;
    if text.len() as u64 > LOG_SOURCE_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {LOG_SOURCE_BYTES_MAX} bytes, the limit for this file"),
        ));
    }
    Ok(text)
}

/// A store follows one log for life: its projections are folds of that log alone.
fn bind(dir: &Path, location: &LogLocation, local_envelopes: u64) -> Result<(), Error> {
    let path = dir.join(LOG_SOURCE_FILE_NAME);
    let wanted = location.source_tag();
    let io = |source| Error::Read { path: path.display().to_string(), source };
    match read_small(&path) {
        Ok(recorded) if recorded.trim() == wanted => Ok(()),
        Ok(recorded) => Err(Error::InvalidInput(format!(
            "store {} follows the log {}, not {wanted}; open it with that log or use another store directory",
            dir.display(),
            recorded.trim()
        ))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if location != &LogLocation::Local && local_envelopes > 0 {
                return Err(Error::InvalidInput(format!(
                    "store {} holds its own log of {local_envelopes} envelopes; a store follows one log",
                    dir.display()
                )));
            }
            let temporary = dir.join(format!("{LOG_SOURCE_FILE_NAME}.tmp"));
            write_private(&temporary, format!("{wanted}\n").as_bytes()).map_err(io)?;
            std::fs::rename(&temporary, &path).map_err(io)
        }
        Err(error) => Err(io(error)),
    }
}

/// Writes a file of the store, owner-only from its creation (a leftover from a crash is replaced).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mnemo_log::PRIVATE_FILE_MODE)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "nats")]
    #[test]
    fn locations_parse() {
        assert_eq!(LogLocation::parse("local").unwrap(), LogLocation::Local);
        assert_eq!(
            LogLocation::parse("nats://127.0.0.1:4222").unwrap(),
            LogLocation::Nats { servers: "nats://127.0.0.1:4222".into(), stream: "MNEMO".into() }
        );
        assert_eq!(
            LogLocation::parse("nats://a:1,nats://b:2/shop").unwrap(),
            LogLocation::Nats { servers: "nats://a:1,nats://b:2".into(), stream: "shop".into() }
        );
        for bad in ["", "fjall", "nats://", "nats://a:1/bad.name", "http://a:1"] {
            assert!(matches!(LogLocation::parse(bad), Err(Error::InvalidInput(_))), "{bad}");
        }
    }

    #[test]
    fn a_store_keeps_the_log_it_was_bound_to() {
        let dir = tempfile::tempdir().unwrap();
        let nats = LogLocation::Nats { servers: "nats://a:1".into(), stream: "S".into() };
        bind(dir.path(), &nats, 0).unwrap();
        bind(dir.path(), &nats, 0).unwrap();
        let error = bind(dir.path(), &LogLocation::Local, 0).unwrap_err();
        assert!(error.to_string().contains("follows the log nats:S"), "{error}");
        let other = tempfile::tempdir().unwrap();
        assert!(bind(other.path(), &nats, 3).unwrap_err().to_string().contains("holds its own log"));
    }

    #[cfg(not(feature = "nats"))]
    #[test]
    fn without_the_nats_feature_a_nats_location_is_refused_and_the_store_stays_unbound() {
        assert_eq!(LogLocation::parse("local").unwrap(), LogLocation::Local);
        for bad in ["nats://127.0.0.1:4222", "", "http://a:1"] {
            assert!(matches!(LogLocation::parse(bad), Err(Error::InvalidInput(_))), "{bad}");
        }
        let error = LogLocation::parse("nats://127.0.0.1:4222/S").unwrap_err();
        assert!(error.to_string().contains("no NATS client"), "{error}");

        let dir = tempfile::tempdir().unwrap();
        let nats = LogLocation::Nats { servers: "nats://a:1".into(), stream: "S".into() };
        let config = crate::Config { log: Some(nats), ..crate::Config::default() };
        let error = crate::Mnemo::open(dir.path(), config).unwrap_err();
        assert!(error.to_string().contains("`nats` feature"), "{error}");
        assert!(
            !dir.path().join(LOG_SOURCE_FILE_NAME).exists(),
            "the store was bound to a log it cannot follow"
        );
        crate::Mnemo::open(dir.path(), crate::Config::default()).unwrap().close().unwrap();
    }
}
