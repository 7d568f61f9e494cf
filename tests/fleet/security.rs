//! (to be written)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_connect() {
    use crate::support::*;
    use fred::prelude::*;
    let Some(store) = store() else { return };
    let t = std::time::Instant::now();
    let c = raw(&store.url()).await;
    println!("init {:?}", t.elapsed());
    let t = std::time::Instant::now();
    let _: String = c.ping(None).await.unwrap();
    println!("ping {:?}", t.elapsed());
    let mut b = Builder::from_config(Config::from_url(&store.url()).unwrap());
    b.with_config(|c| c.fail_fast = false);
    let c2 = b.build().unwrap();
    let t = std::time::Instant::now();
    drop(c2.connect());
    c2.wait_for_connect().await.unwrap();
    println!("connect {:?}", t.elapsed());
}
