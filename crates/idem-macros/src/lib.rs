//! # idem-macros
//!
//! The `#[idempotent(...)]` attribute. Use it through the runtime crate that
//! fits: `idem_axum::idempotent` on axum handlers, `idem_core::idempotent` on
//! any other async function (a queue consumer). It parses and checks its
//! arguments at compile time and emits a thin call into the runtime; it has
//! no logic of its own.
//!
//! See [`macro@idempotent`] for the arguments.

mod attr;
mod expand;
mod framework;
mod handler;
mod handler_key;
mod params;
mod plan;
mod validate;

use proc_macro::TokenStream;
use quote::ToTokens;

/// Makes an async function run at most once per idempotency key, recording its
/// result and replaying it to every retry.
///
/// The crate you take it from picks the form: `idem_axum::idempotent` is
/// the handler form unless `engine = ...` is given; `idem_core::idempotent`
/// is always the function form.
///
/// **On an axum handler**: the key comes from the `Idempotency-Key` header
/// (or `key = <expression>` over the extracted values, which are references
/// there), the [`Engine`] from the router state (`Engine: FromRef<S>`), the
/// fingerprint covers the method, route, path, query and every extractor's
/// whole value, whatever pattern binds it (bodies as bytes, parsed when
/// JSON; `State` left out; `skip(binding)` leaves a parameter out), and the
/// response, any `IntoResponse` including `impl IntoResponse`, is recorded and
/// replayed with the HTTP semantics of `idem-axum` (400, 409, 422, 503,
/// `Idempotent-Replayed`). The user's function is kept whole inside the
/// generated handler, which axum routes; that handler returns
/// `axum::response::Response`.
///
/// ```no_run
/// use axum::extract::{FromRef, Path, State};
/// use axum::{http::StatusCode, Json};
/// use idem_axum::idempotent;
/// use idem_core::Engine;
///
/// #[derive(Clone, FromRef)]
/// struct App { engine: Engine }
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Debit { amount: u64 }
///
/// #[derive(serde::Serialize)]
/// struct Receipt { amount: u64 }
///
/// #[idempotent(ttl = "24h", scope = "account")]
/// async fn debit(State(app): State<App>, Path(account): Path<String>, Json(req): Json<Debit>)
///     -> (StatusCode, Json<Receipt>)
/// {
///     let _ = (app, account);
///     (StatusCode::CREATED, Json(Receipt { amount: req.amount }))
/// }
/// ```
///
/// **On any other async function or `&self` method** (a queue consumer):
/// `key` and `engine` are expressions over the arguments; the return type
/// must be `Result<T, E>` with `T: Serialize + DeserializeOwned` and
/// `E: Failure + Serialize + DeserializeOwned`; it becomes
/// `Result<Ran<T>, idem_core::Error<E>>`, so that callers see whether the result
/// was executed now or replayed, and the idempotency errors (in flight,
/// reused key, store down).
///
/// ```no_run
/// use idem_core::{idempotent, Engine, Failure};
///
/// struct Consumer { engine: Engine }
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct OrderPlaced { id: String }
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Shipment { parcel: String }
///
/// #[derive(Debug, serde::Serialize, serde::Deserialize)]
/// struct ShipError;
/// impl Failure for ShipError {
///     fn is_final(&self) -> bool { false }
/// }
///
/// impl Consumer {
///     #[idempotent(engine = self.engine, key = msg.id, ttl = "7d")]
///     async fn on_order_placed(&self, msg: OrderPlaced) -> Result<Shipment, ShipError> {
///         Ok(Shipment { parcel: format!("parcel-{}", msg.id) })
///     }
/// }
/// ```
///
/// | argument | type | default | meaning |
/// | --- | --- | --- | --- |
/// | `ttl` | duration string (`"24h"`, `"7d"`, `"30s"`) | the engine's (24h) | how long a completed record is kept |
/// | `lease` | duration string, shorter than `ttl` | the engine's (10s) | how long a claim lives without renewal, and so how long a key stays claimed after its holder crashed or was dropped mid-way |
/// | `scope` | string naming a parameter binding | global scope | whose keys these are: the binding's `Display` value namespaces the keys |
/// | `key` | expression | the `Idempotency-Key` header (handlers) | the idempotency key; required outside handlers |
/// | `engine` | expression giving `Engine` or `&Engine` | the router state (handlers) | the engine; required outside handlers |
/// | `skip(a, b)` | parameter bindings | none | parameters left out of the fingerprint |
/// | `on_conflict` | `"reject"` or `"wait(<duration>)"` | the engine's (`reject`) | what a duplicate in flight gets: 409 / `InFlight`, or a wait for the first result |
/// | `name` | string | the function's name | the operation's stable name in the fingerprint: keep it when renaming the function |
/// | `claim` | identifier | none | binds the `idem_core::Claim` inside the body: its fencing token, or completion inside a database transaction |
/// | `crate` | string path | `::idem_axum` (handlers), `::idem_core` (others) | where the runtime is, if the crate was renamed |
///
/// Every misuse is a compile error on the offending token that says what to
/// write instead.
///
/// [`Engine`]: https://docs.rs/idem-core/latest/idem_core/struct.Engine.html
#[proc_macro_attribute]
pub fn idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    attribute(plan::Origin::Axum, args, item)
}

/// The attribute as `idem_actix::idempotent`: the handler form for
/// actix-web unless `engine = ...` is given; see [`macro@idempotent`]. The
/// engine comes from the app data (`App::new().app_data(engine.clone())`),
/// and the fingerprint is the request itself (method, route pattern, path,
/// query and body, parsed when JSON), as with `idem_actix::Idempotency`.
#[proc_macro_attribute]
pub fn idempotent_actix(args: TokenStream, item: TokenStream) -> TokenStream {
    attribute(plan::Origin::Actix, args, item)
}

/// The attribute as `idem_core::idempotent`: always the function form
/// (`engine = ...` and `key = ...` required); see [`macro@idempotent`].
#[proc_macro_attribute]
pub fn idempotent_fn(args: TokenStream, item: TokenStream) -> TokenStream {
    attribute(plan::Origin::Core, args, item)
}

fn attribute(origin: plan::Origin, args: TokenStream, item: TokenStream) -> TokenStream {
    let original: proc_macro2::TokenStream = item.clone().into();
    let Ok(function) = syn::parse::<syn::ItemFn>(item) else {
        if let Ok(closure) = syn::parse2::<syn::ExprClosure>(original.clone()) {
            // In expression position: one error, and the closure kept as
            // the block's value, so that nothing else is reported.
            let error = syn::Error::new_spanned(
                closure.or1_token,
                "`#[idempotent]` goes on an `async fn`, not on a closure: write the closure's body as a named `async fn` with the attribute, and pass the function's name instead",
            )
            .to_compile_error();
            return quote::quote!({ #error; #closure }).into();
        }
        let error = match syn::parse2::<syn::TraitItemFn>(original.clone()) {
            Ok(declared) if declared.default.is_none() => syn::Error::new_spanned(
                &declared.sig,
                "`#[idempotent]` needs a body to run: put it on the method in each `impl` block, not on its declaration in the trait",
            ),
            _ => syn::Error::new_spanned(
                &original,
                "`#[idempotent]` applies to an `async fn` (a function or a method); it cannot go on this item",
            ),
        };
        return with_original(&error, original);
    };
    let args = match syn::parse::<attr::Args>(args) {
        Ok(args) => args,
        Err(error) => return with_original(&error, function.into_token_stream()),
    };
    match validate::validate(origin, &args, &function) {
        Ok(plan) => expand::expand(plan, function).into(),
        Err(error) => with_original(&error, function.into_token_stream()),
    }
}

/// The error, and the item unchanged, so that the user sees this one error
/// rather than a cascade from a missing item.
fn with_original(error: &syn::Error, original: proc_macro2::TokenStream) -> TokenStream {
    let mut out = error.to_compile_error();
    out.extend(original);
    out.into()
}
