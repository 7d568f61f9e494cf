//! Progress notifications, from the server that sends them to the host that asked for them.
//!
//! A host asks for progress by putting a `progressToken` in its `tools/call`'s `_meta`; the
//! server sends `notifications/progress` with that token while it works. Through the gateway
//! the call reaches the server on another connection, where the host's token means nothing
//! (and two hosts may use the same one): the request to the server carries a token of the
//! gateway's connection (rmcp numbers each request's; the library client tells it,
//! `ToolHealthClient::call_tool_with_progress`), and what comes back with it is forwarded to
//! the host that made the call, under the host's token. A route lives as long as its call and [`GRACE`] more (rmcp
//! hands each notification to a task of its own, so one sent just before the answer may be
//! handled just after it); they are bounded (a host that opens more calls than [`MAX_ROUTES`]
//! at once gets no progress for the rest, never an error).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use rmcp::RoleServer;

/// Calls with progress in flight at most, per upstream.
pub(crate) const MAX_ROUTES: usize = 10_000;

/// How long a route outlives its call.
pub(crate) const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

type Routes = HashMap<ProgressToken, (Peer<RoleServer>, ProgressToken)>;

/// The routes of one upstream's connection: the token its request carries → the host and the
/// host's token.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<Routes>,
}

impl std::fmt::Debug for ProgressRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressRoutes")
            .field("in_flight", &self.lock().len())
            .finish()
    }
}

/// A call's route: [`tell`](Self::tell) gives the library client what to do with the token
/// its request is sent with (once per attempt: a call retried on a new connection is sent
/// again); dropping the route (the call ended) forgets it after [`GRACE`].
#[derive(Debug)]
pub(crate) struct Route {
    routes: Arc<ProgressRoutes>,
    /// The host and its token.
    host: Peer<RoleServer>,
    host_token: ProgressToken,
    /// The upstream's tokens, once each attempt is sent.
    tokens: Arc<Mutex<Vec<ProgressToken>>>,
}

impl Route {
    /// What the client calls with the token of the request it sent: from then on, that
    /// token's progress goes to the host under the host's token.
    pub(crate) fn tell(&self) -> impl FnOnce(&ProgressToken) + Send + 'static {
        let routes = Arc::clone(&self.routes);
        let slot = Arc::clone(&self.tokens);
        let (host, host_token) = (self.host.clone(), self.host_token.clone());
        move |token: &ProgressToken| {
            let mut map = routes.lock();
            if map.len() < MAX_ROUTES {
                map.insert(token.clone(), (host, host_token));
                slot.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(token.clone());
            }
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        let tokens =
            std::mem::take(&mut *self.tokens.lock().unwrap_or_else(PoisonError::into_inner));
        if tokens.is_empty() {
            return;
        }
        let routes = Arc::clone(&self.routes);
        let forget = move || {
            let mut map = routes.lock();
            for token in &tokens {
                map.remove(token);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(GRACE).await;
                    forget();
                });
            }
            Err(_) => forget(),
        }
    }
}

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A route for a call of `host`, which asked for progress under `host_token` (bound to
    /// its upstream token when the request is sent).
    pub(crate) fn route(
        self: &Arc<Self>,
        host: Peer<RoleServer>,
        host_token: ProgressToken,
    ) -> Route {
        Route {
            routes: Arc::clone(self),
            host,
            host_token,
            tokens: Arc::default(),
        }
    }

    /// A progress notification from the upstream: to the host of its call, under the host's
    /// token. One that matches no call in flight (late, or made up) is dropped.
    pub(crate) async fn forward(&self, mut progress: ProgressNotificationParam) {
        let Some((host, token)) = self.lock().get(&progress.progress_token).cloned() else {
            return;
        };
        progress.progress_token = token;
        // The host may be gone; its call then ends too.
        let _ = host.notify_progress(progress).await;
    }
}
