//! `DynamoStore` against moto's server (an emulator that speaks DynamoDB's
//! wire protocol), beyond the conformance kit: one debit under 64
//! duplicates from two processes, debits committed with their records in
//! one `TransactWriteItems`, a holder frozen past its lease committing
//! nothing, a record of a newer format refused, and a table made by
//! something else failing at start with a message that says so.

use std::time::Duration;

use idem_core::store::Begin;
use idem_core::{Call, Engine, OnInFlight, Policy, Ran, Store, StoreErrorKind};
use idem_dynamodb::aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, Put,
    ScalarAttributeType, TransactWriteItem,
};
use idem_dynamodb::aws_sdk_dynamodb::Client;
use idem_dynamodb::DynamoStore;
use idem_tests::second_process::SecondProcess;
use idem_tests::{dynamo_store, dynamodb_client, unique_table_name, EMULATED_MAX_OUTCOME};

use idem_tests::DebitError;

fn call(key: &str) -> Call {
    idem_tests::call("dynamodb-tests", key)
}

/// The application's own table: one item per debit, keyed by its holder.
async fn ledger(client: &Client) -> String {
    let table = unique_table_name("ledger");
    client
        .create_table()
        .table_name(&table)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name("holder")
                .attribute_type(ScalarAttributeType::S)
                .build()
                .expect("attribute"),
        )
        .key_schema(
            KeySchemaElement::builder()
                .attribute_name("holder")
                .key_type(KeyType::Hash)
                .build()
                .expect("key"),
        )
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("the ledger table");
    table
}

/// Every debit in the ledger.
async fn debits(client: &Client, ledger: &str) -> usize {
    let scanned = client
        .scan()
        .table_name(ledger)
        .consistent_read(true)
        .send()
        .await
        .expect("scan the ledger");
    scanned.items().len()
}

/// One debit: the ledger's item and the record, in one transaction.
async fn debit(
    store: &DynamoStore,
    ledger: &str,
    claim: &idem_core::Claim,
    holder: &str,
) -> Result<String, DebitError> {
    let mut tx = store.transaction();
    let put = Put::builder()
        .table_name(ledger)
        .item("holder", AttributeValue::S(holder.to_owned()))
        .item("amount", AttributeValue::N("1000".to_owned()))
        .build()
        .map_err(|e| DebitError::Database(e.to_string()))?;
    tx.push(TransactWriteItem::builder().put(put).build());
    let receipt = format!("debited by {holder}");
    let outcome = idem_core::encode_result(&Ok::<_, DebitError>(&receipt))
        .map_err(|e| DebitError::Database(e.to_string()))?;
    claim.commit(tx, &outcome).await.map_err(DebitError::from)?;
    Ok(receipt)
}

/// Runs `n` duplicates of the debit `key` at once; (executed, replayed).
async fn duplicates(
    store: &DynamoStore,
    ledger: &str,
    key: &str,
    n: usize,
    who: &str,
) -> (usize, usize) {
    let engine = Engine::new(store.clone()).with_policy(
        Policy::default()
            .lease(Duration::from_secs(30))
            .on_in_flight(OnInFlight::Wait {
                max: Duration::from_secs(30),
            }),
    );
    let (store, ledger) = (store.clone(), ledger.to_owned());
    idem_tests::run_duplicates(&engine, &call(key), n, who, move |claim, holder| {
        let (store, ledger) = (store.clone(), ledger.clone());
        async move { debit(&store, &ledger, &claim, &holder).await }
    })
    .await
}

/// The second process of the test below: opens the tables it is given,
/// says it is ready, waits for the word, runs 32 duplicates and prints
/// what it got. Run only by that test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the second process of a_debit_asked_64_times_by_two_processes_runs_once"]
async fn second_process_on_the_same_table() {
    let (Ok(records), Ok(ledger)) = (
        std::env::var("IDEM_DYNAMODB_RECORDS"),
        std::env::var("IDEM_DYNAMODB_LEDGER"),
    ) else {
        return;
    };
    let store = DynamoStore::new(dynamodb_client(), &records);
    idem_tests::second_process::ready_then_wait();
    let (executed, replayed) = duplicates(&store, &ledger, "two-processes", 32, "child").await;
    idem_tests::second_process::report(executed, replayed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debit_asked_64_times_by_two_processes_runs_once() {
    let store = dynamo_store().await;
    let ledger = ledger(store.client()).await;
    let mut second = SecondProcess::start(
        "second_process_on_the_same_table",
        &[
            ("IDEM_DYNAMODB_RECORDS", store.table()),
            ("IDEM_DYNAMODB_LEDGER", &ledger),
        ],
    );
    second.go();
    let (here, here_replayed) = duplicates(&store, &ledger, "two-processes", 32, "parent").await;
    let (there, there_replayed) = second.counts().await;
    assert_eq!(here + there, 1, "one execution in both processes");
    assert_eq!(here_replayed + there_replayed, 63, "63 receipts replayed");
    assert_eq!(debits(store.client(), &ledger).await, 1, "one debit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_lease_debits_nothing_and_the_takeover_debits_once() {
    let store = dynamo_store().await;
    let ledger = ledger(store.client()).await;
    let c = call("frozen");
    let short = Duration::from_millis(300);
    let Ok(Begin::Acquired(frozen)) = store.begin(c.record_id(), c.fingerprint(), short).await
    else {
        panic!("the first holder claims the debit");
    };
    idem_tests::until_claim_lapsed(&store, c.record_id(), "the frozen holder").await;
    // Another attempt takes the debit over and commits it with its record.
    let engine = Engine::new(store.clone());
    let taken = engine
        .run(&c, |claim| {
            let (store, ledger) = (store.clone(), ledger.clone());
            async move { debit(&store, &ledger, &claim, "takeover").await }
        })
        .await
        .expect("the takeover debits");
    assert!(matches!(taken, Ran::Executed(_)));
    // The frozen holder wakes and commits its debit: refused, nothing lands.
    let mut tx = store.transaction();
    let put = Put::builder()
        .table_name(&ledger)
        .item("holder", AttributeValue::S("frozen".to_owned()))
        .build()
        .expect("put");
    tx.push(TransactWriteItem::builder().put(put).build());
    idem_core::StoreTransaction::complete(
        &mut tx,
        c.record_id(),
        &frozen,
        &idem_core::Outcome::new(b"late".to_vec()),
        Duration::from_mins(1),
    )
    .await
    .expect("the completion joins the transaction");
    let late = idem_core::StoreTransaction::commit(tx).await;
    assert!(
        matches!(&late, Err(e) if e.kind() == StoreErrorKind::LeaseLost),
        "the frozen holder's commit is refused as a lost lease: {late:?}"
    );
    assert_eq!(
        debits(store.client(), &ledger).await,
        1,
        "the takeover's debit only"
    );
    let again = engine
        .run(&c, |_| async {
            Ok::<_, DebitError>("ran again".to_owned())
        })
        .await
        .expect("a retry");
    assert_eq!(again, Ran::Replayed("debited by takeover".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_too_large_for_an_item_is_refused_and_the_claim_stays_its_holders() {
    let store = dynamo_store().await;
    let c = call("too-large");
    let Ok(Begin::Acquired(lease)) = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
        .await
    else {
        panic!("claimed");
    };
    let big = idem_core::Outcome::new(vec![7u8; EMULATED_MAX_OUTCOME + 1]);
    let refused = store
        .complete(c.record_id(), &lease, &big, Duration::from_mins(1))
        .await;
    let e = refused.expect_err("refused");
    assert_eq!(e.kind(), StoreErrorKind::Full);
    assert!(
        e.to_string().contains("does not fit a DynamoDB item"),
        "{e}"
    );
    // The same in a transaction: refused before anything is sent.
    let mut tx = store.transaction();
    let in_tx = idem_core::StoreTransaction::complete(
        &mut tx,
        c.record_id(),
        &lease,
        &big,
        Duration::from_mins(1),
    )
    .await;
    assert!(matches!(in_tx, Err(e) if e.kind() == StoreErrorKind::Full));
    store
        .release(c.record_id(), &lease)
        .await
        .expect("still the holder's claim");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_written_by_a_newer_version_is_refused_not_misread() {
    let store = dynamo_store().await;
    let c = call("newer");
    let mut id = c.record_id().as_bytes().to_vec();
    store
        .client()
        .put_item()
        .table_name(store.table())
        .item("pk", AttributeValue::B(std::mem::take(&mut id).into()))
        .item("fmt", AttributeValue::N("9".to_owned()))
        .item("somethingnew", AttributeValue::S("?".to_owned()))
        .send()
        .await
        .expect("a record from the future");
    let got = store
        .begin(c.record_id(), c.fingerprint(), Duration::from_secs(30))
        .await;
    let e = got.expect_err("refused");
    assert_eq!(e.kind(), StoreErrorKind::NewerFormat, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_by_something_else_fails_at_start_and_says_why() {
    let client = dynamodb_client();
    let table = ledger(&client).await;
    let e = idem_dynamodb::check_table(&client, &table)
        .await
        .expect_err("not idem's table");
    let text = e.to_string();
    assert!(
        text.contains("made by something else") && text.contains("holder"),
        "{text}"
    );
    let missing = idem_dynamodb::check_table(&client, "idem_no_such_table")
        .await
        .expect_err("no table");
    assert!(
        missing.to_string().contains("idem_no_such_table"),
        "{missing}"
    );
}
