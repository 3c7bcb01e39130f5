//! `rediss://`: the Redis store over TLS to a real redis-server on 127.0.0.1 with a certificate
//! made for the test (openssl), verified against the test's own authority.

mod fleet_support;

use std::process::Command;

use fleet_support::{RedisServer, free_port};
use reliable::fleet::{BreakerOp, BreakerSpec, RedisStore, Store};
use reliable_core::Duration;
use reliable_core::breaker::{BreakerConfig, BreakerPolicy, HalfOpenConfig};

fn openssl(args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .status()
        .expect("openssl must be installed");
    assert!(status.success(), "openssl {args:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_store_over_tls() {
    let dir = std::env::temp_dir().join(format!("fleet-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = |f: &str| dir.join(f).to_str().unwrap().to_owned();
    // An authority, and a certificate for 127.0.0.1 signed by it.
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        &p("ca.key"),
        "-out",
        &p("ca.pem"),
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        &p("server.key"),
        "-out",
        &p("server.csr"),
    ]);
    std::fs::write(p("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        &p("server.csr"),
        "-CA",
        &p("ca.pem"),
        "-CAkey",
        &p("ca.key"),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        &p("ext"),
        "-out",
        &p("server.pem"),
    ]);
    // Two ports: another process may take either before the server binds it, so a refusal
    // tries two fresh ones.
    let (server, tls_port) = (0..5)
        .find_map(|_| {
            let tls_port = free_port().to_string();
            let args = [
                "--tls-port",
                &tls_port,
                "--tls-cert-file",
                &p("server.pem"),
                "--tls-key-file",
                &p("server.key"),
                "--tls-ca-cert-file",
                &p("ca.pem"),
                "--tls-auth-clients",
                "no",
            ];
            let server = RedisServer::try_start_on(free_port(), &args).ok()?;
            Some((server, tls_port))
        })
        .expect("redis-server with TLS did not start on 5 pairs of ports");
    let ca = std::fs::read(p("ca.pem")).unwrap();
    let url = format!("rediss://127.0.0.1:{tls_port}");
    let store = RedisStore::open_tls(&url, "tls", &ca).unwrap();
    let config = BreakerConfig::layered_exercise();
    let half_open = HalfOpenConfig {
        probe_timeout: Duration::from_secs(10),
        ..config.half_open
    };
    let spec = BreakerSpec::new(
        &BreakerPolicy::new(BreakerConfig {
            half_open,
            ..config
        })
        .unwrap(),
    )
    .unwrap();
    let r = store
        .breaker("b", &spec, 0, BreakerOp::Acquire)
        .await
        .unwrap();
    assert_eq!(r.generation, 0);
    // Without the authority, the certificate is refused.
    let plain = RedisStore::open(&url, "tls").unwrap();
    assert!(plain.breaker("b", &spec, 0, BreakerOp::View).await.is_err());
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
