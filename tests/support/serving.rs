//! Serving an axum router or an actix-web app on a real socket, at a free
//! port of 127.0.0.1.

/// Serves `router` on 127.0.0.1 at a free port; returns its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("server");
    });
    format!("http://{addr}")
}

/// Serves the actix-web app that `app` makes (once per worker) on
/// 127.0.0.1 at a free port, on a thread of its own with its own actix
/// system, until the test process ends; returns its base URL.
pub fn serve_actix<F, T>(app: F) -> String
where
    F: Fn() -> actix_web::App<T> + Send + Clone + 'static,
    T: actix_web::dev::ServiceFactory<
            actix_web::dev::ServiceRequest,
            Config = (),
            Response = actix_web::dev::ServiceResponse<actix_web::body::BoxBody>,
            Error = actix_web::Error,
            InitError = (),
        > + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            actix_web::HttpServer::new(app)
                .workers(2)
                .disable_signals()
                .listen(listener)
                .expect("listen")
                .run()
                .await
                .expect("server");
        });
    });
    format!("http://{addr}")
}
