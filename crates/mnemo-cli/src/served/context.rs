//! The context of a command that runs in the store server for a caller (`command/run`), kept per
//! thread: the store to use, where its output goes, and what its caller handed over. `open` takes the
//! store from it, the printing in `term` writes through it, `sync --watch` stops by its flag, and
//! `import` reads the spooled inputs from it. A thread that runs no command for a caller has none,
//! and each of these falls back to the process's own.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use mnemo::Mnemo;
use mnemo_server::command::CommandIo;
use mnemo_server::methods::{OutputStream, SpooledInput};

/// A command running in the store server: the store, where its output goes, and what its caller
/// handed over.
pub(crate) struct Served {
    pub(super) store: Arc<Mnemo>,
    pub(super) io: CommandIo,
    pub(super) cwd: PathBuf,
    pub(super) env: BTreeMap<String, String>,
    pub(super) inputs: Vec<SpooledInput>,
}

/// Runs `run` with `served` as this thread's context.
pub(super) fn with<T>(served: &Rc<Served>, run: impl FnOnce() -> T) -> T {
    SERVED.with(|current| *current.borrow_mut() = Some(Rc::clone(served)));
    let result = run();
    SERVED.with(|current| *current.borrow_mut() = None);
    result
}

thread_local! {
    /// The command this thread runs for a caller, if it runs one.
    static SERVED: RefCell<Option<Rc<Served>>> = const { RefCell::new(None) };
}

fn current() -> Option<Rc<Served>> {
    SERVED.with(|current| current.borrow().clone())
}

/// The server's open store, when this thread runs a command for a caller.
pub(crate) fn store() -> Option<Arc<Mnemo>> {
    current().map(|served| Arc::clone(&served.store))
}

/// Writes to the caller's stream when this thread runs a command for one; false when it does not.
pub(crate) fn write(stream: OutputStream, text: &str) -> bool {
    match current() {
        Some(served) => {
            served.io.write(stream, text);
            true
        }
        None => false,
    }
}

/// Whether this thread runs a command for a caller.
pub(crate) fn active() -> bool {
    current().is_some()
}

/// The flag that stops a served command (its caller went away, or the server stops).
pub(crate) fn stop_flag() -> Option<Arc<AtomicBool>> {
    current().map(|served| served.io.cancel_flag())
}

/// An environment variable: the caller's when this thread runs a command for one.
pub(crate) fn var_os(name: &str) -> Option<std::ffi::OsString> {
    match current() {
        Some(served) => served.env.get(name).map(Into::into),
        None => std::env::var_os(name),
    }
}

/// The spooled copy of an input the caller named `name` (`-`, a pipe), opened.
pub(crate) fn input(name: &str) -> Option<std::io::Result<std::fs::File>> {
    let served = current()?;
    let input = served.inputs.iter().find(|input| input.name == name)?;
    Some(std::fs::File::open(&input.path))
}
