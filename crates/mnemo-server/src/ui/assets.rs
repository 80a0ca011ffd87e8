//! The page, embedded in the binary: plain HTML, CSS and ES modules, no build step and nothing
//! fetched from the network at run time.

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asset {
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file the page uses, by path.
const ASSETS: &[(&str, Asset)] = &[
    ("/", Asset { content_type: HTML, bytes: include_bytes!("../../ui/index.html") }),
    ("/style.css", Asset { content_type: CSS, bytes: include_bytes!("../../ui/style.css") }),
    ("/app.js", Asset { content_type: JS, bytes: include_bytes!("../../ui/app.js") }),
    ("/api.js", Asset { content_type: JS, bytes: include_bytes!("../../ui/api.js") }),
    ("/dom.js", Asset { content_type: JS, bytes: include_bytes!("../../ui/dom.js") }),
    ("/views.js", Asset { content_type: JS, bytes: include_bytes!("../../ui/views.js") }),
    ("/session.js", Asset { content_type: JS, bytes: include_bytes!("../../ui/session.js") }),
];

/// The embedded file at `path` (`/index.html` is `/`).
pub(crate) fn find(path: &str) -> Option<Asset> {
    let path = if path == "/index.html" { "/" } else { path };
    ASSETS.iter().find(|(at, _)| *at == path).map(|(_, asset)| *asset)
}
