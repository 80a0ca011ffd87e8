//! What the server's integration tests share: a server in a thread of the test process.

use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mnemo_server::client::{Client, ClientError, ConnectOptions};
use mnemo_server::methods::{Empty, Shutdown};
use mnemo_server::protocol::Reason;
use mnemo_server::server::{ServeOptions, ServeReport, serve};

/// A server on `store` in a thread of this process; returns once it answers.
pub fn start(store: &Path) -> JoinHandle<ServeReport> {
    let dir = store.to_path_buf();
    let handle = std::thread::spawn(move || {
        let mut options = ServeOptions::default();
        options.idle_exit = None;
        serve(&dir, options).unwrap()
    });
    let began = Instant::now();
    loop {
        match Client::connect(store, &ConnectOptions::new("probe")) {
            Ok(_) => return handle,
            Err(ClientError::NoServer { .. }) if began.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(other) => panic!("server did not come up: {other}"),
        }
    }
}

/// Shuts the server down through a client and waits for its report. A test that has just closed
/// connections may find the server still counting them (it notices a close when it next reads the
/// socket), so an `overloaded` answer is retried for a while.
pub fn stop(store: &Path, server: JoinHandle<ServeReport>) -> ServeReport {
    let began = Instant::now();
    loop {
        let answer = Client::connect(store, &ConnectOptions::new("test"))
            .and_then(|mut client| client.call::<Shutdown>(&Empty {}));
        match answer {
            Ok(_) => break,
            Err(ClientError::Rpc(error))
                if error.reason() == Reason::Overloaded && began.elapsed() < Duration::from_secs(30) =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(other) => panic!("shutdown failed: {other}"),
        }
    }
    server.join().unwrap()
}
