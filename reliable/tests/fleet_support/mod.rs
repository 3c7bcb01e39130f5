//! A real `redis-server` for the fleet tests: started on a free loopback port with no
//! persistence, ended on every path (its guard kills it on drop, panics included).

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A running `redis-server`, killed when dropped.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    extra: Vec<String>,
}

/// Ports this test process has handed out: never handed out twice, so two tests running at
/// once never start their servers on one port (the second would fail to bind, and its readiness
/// check would find the first's server, which ends under it when the first test does).
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback port free right now, never handed out before in this process.
pub fn free_port() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = l.local_addr().unwrap().port();
        if HANDED_OUT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port)
        {
            return port;
        }
    }
}

/// How many fresh ports `start_with` tries: another process may take a port between its
/// choosing and the server's binding.
const ATTEMPTS: usize = 5;

impl RedisServer {
    /// A new server on a free port. A missing `redis-server` fails the test: it never skips.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A new server on a free port with extra arguments (`--requirepass x`), on another port
    /// if another process took the first.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        let mut refused = Vec::new();
        for _ in 0..ATTEMPTS {
            match RedisServer::try_start_on(free_port(), extra) {
                Ok(s) => return s,
                Err(e) => refused.push(e),
            }
        }
        panic!("redis-server did not start on {ATTEMPTS} ports: {refused:?}");
    }

    /// A new server on `port`, or why not (the port is another process's).
    pub fn try_start_on(port: u16, extra: &[&str]) -> Result<RedisServer, String> {
        let mut s = RedisServer {
            child: None,
            port,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        s.spawn()?;
        Ok(s)
    }

    /// Spawns the server and waits until it listens. The listener must be this child (its
    /// `INFO` names its pid): a port another process holds is an error, never that process's
    /// server taken for ours.
    fn spawn(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args([
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
                "--protected-mode",
                "no",
            ])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install -y redis-server)");
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!(
                    "redis-server on {port} exited ({status}): port taken?"
                ));
            }
            if let Some(owner) = self.listener_pid() {
                if owner == pid {
                    return Ok(());
                }
                self.kill();
                return Err(format!(
                    "port {port} is served by pid {owner}, not ours ({pid})"
                ));
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!("redis-server did not listen on {port} in 10 s"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The pid of the Redis listening on the port (`INFO server`'s `process_id`), if one answers.
    fn listener_pid(&self) -> Option<u32> {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut ask = String::new();
        if let Some(i) = self.extra.iter().position(|a| a == "--requirepass") {
            ask += &format!("AUTH {}\r\n", self.extra.get(i + 1)?);
        }
        ask += "INFO server\r\n";
        conn.write_all(ask.as_bytes()).ok()?;
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        while reply.len() < 1 << 16 {
            let n = conn.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&reply);
            if let Some(rest) = text.split("process_id:").nth(1)
                && let Some(line) = rest.split("\r\n").next()
                && rest.contains("\r\n")
            {
                return line.trim().parse().ok();
            }
        }
        None
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Kills the server (its data is gone: no persistence).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again, empty, on the same port.
    pub fn restart_empty(&mut self) {
        self.kill();
        if let Err(e) = self.spawn() {
            panic!("restart on the same port: {e}");
        }
    }

    /// Sends a signal (`STOP`, `CONT`) to the server.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{sig}");
    }

    /// A plain connection for setting the server up.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .expect("connect to the test server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(c) = &self.child {
            // A stopped server still dies of SIGKILL; CONT first so nothing lingers stopped.
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(c.id().to_string())
                .status();
        }
        self.kill();
    }
}

/// A deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
