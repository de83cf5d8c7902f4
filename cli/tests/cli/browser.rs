//! The report and the diff in a real browser: headless Chromium driven over WebDriver
//! (chromedriver, through fantoccini). The DOM must show every socket visited, the rework
//! reason at its visit, each prompt entry's destination and the diff's first divergence; a
//! screenshot of each view must be neither blank nor an error page. The screenshots the
//! README shows are `docs/report.png` and `docs/diff.png`, written when missing or when
//! CASTLOG_UPDATE_SCREENSHOTS is set.
//!
//! Without chromedriver on the PATH the test says so and passes, unless
//! CASTLOG_REQUIRE_BROWSER is set (`.ci/run` sets it, after installing Debian's `chromium`
//! and `chromium-driver`).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::report::{RECAST_REPLY, repaired_reworked_recast, write_report};

/// chromedriver on the PATH, if any.
fn chromedriver() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("chromedriver"))
        .find(|p| p.is_file())
}

/// A chromedriver process, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start(program: &Path) -> Driver {
        // A free port, asked of the system, then handed to chromedriver.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Waits until it listens (it exits with an error otherwise, which ends the wait).
        let mut driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return driver;
            }
            if let Ok(Some(status)) = driver.child.try_wait() {
                panic!("chromedriver exited before listening: {status}");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("chromedriver never listened on port {port}");
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn session(driver: &Driver) -> Client {
    let mut options = json!({
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1600", "--hide-scrollbars"],
    });
    for binary in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(binary).exists() {
            options["binary"] = json!(binary);
            break;
        }
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    // chromedriver speaks plain HTTP on loopback: no TLS connector is needed.
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("no browser session from chromedriver: {e}"))
}

/// Decodes a PNG screenshot and checks it shows a page: not one flat colour, with dark text
/// on a light page.
fn assert_shows_a_page(png: &[u8], what: &str) {
    let decoder = png::Decoder::new(png);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<f64> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| (f64::from(p[0]) + f64::from(p[1 % channels]) + f64::from(p[2 % channels])) / 3.0)
        .collect();
    assert!(
        info.width >= 800 && info.height >= 600,
        "{what}: {}x{}",
        info.width,
        info.height
    );
    let n = pixels.len() as f64;
    let mean = pixels.iter().sum::<f64>() / n;
    let variance = pixels.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let dark = pixels.iter().filter(|v| **v < 96.0).count() as f64 / n;
    assert!(
        variance > 100.0,
        "{what}: the screenshot is nearly blank (variance {variance:.1})"
    );
    assert!(
        mean > 160.0,
        "{what}: the page is not the light report page (mean {mean:.1})"
    );
    assert!(
        dark > 0.005,
        "{what}: almost no text on the screenshot ({dark:.4} dark)"
    );
}

/// Keeps a screenshot for the README when it is missing or asked for.
fn keep_for_readme(png: &[u8], name: &str) {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let file = docs.join(name);
    if !file.exists() || std::env::var_os("CASTLOG_UPDATE_SCREENSHOTS").is_some() {
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(&file, png).unwrap();
    }
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

async fn strings(client: &Client, script: &str) -> Vec<String> {
    let value = client.execute(script, vec![]).await.unwrap();
    value
        .as_array()
        .unwrap_or_else(|| panic!("{script} gave {value}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn check_report(client: &Client, report: &Path, sandbox: &Sandbox) {
    client.goto(&file_url(report)).await.unwrap();
    assert_eq!(client.title().await.unwrap(), "castlog report: a");
    let shot = client.screenshot().await.unwrap();
    assert_shows_a_page(&shot, "report");
    std::fs::write(sandbox.path("report.png"), &shot).unwrap();
    keep_for_readme(&shot, "report.png");

    // Every socket visited has its visits in the timeline.
    let mut visited = strings(
        client,
        "return Array.from(document.querySelectorAll('section.visit[data-socket]')).map(s => s.dataset.socket);",
    )
    .await;
    visited.dedup();
    visited.sort();
    visited.dedup();
    assert_eq!(
        visited,
        [
            "Socket-1", "Socket-2", "Socket-3", "Socket-4", "Socket-5", "Socket-6"
        ]
    );
    // The rework reason is shown (visible, not only in the markup) at its visit.
    let reason = client
        .find(Locator::Css(
            "section.visit[data-key='Socket-4 WI-1 #1'] .rework-reason",
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        reason,
        "greet() ignores the user's name; it must print hello, <name>."
    );
    let others = strings(
        client,
        "return Array.from(document.querySelectorAll('.rework-reason')).map(r => r.closest('section.visit').dataset.key);",
    )
    .await;
    assert_eq!(others, ["Socket-4 WI-1 #1"]);

    // A prompt opened with the keyboard shows each entry with its destination in words.
    let summary = client
        .find(Locator::Css(
            "details.prompt-view[data-socket='Socket-3'][data-visit='2'] > summary",
        ))
        .await
        .unwrap();
    summary.send_keys(" ").await.unwrap();
    let open = client
        .execute(
            "return document.querySelector(\"details.prompt-view[data-socket='Socket-3'][data-visit='2']\").open;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(open, json!(true), "Space on the prompt's summary opens it");
    let entries = client
        .find_all(Locator::Css(
            "details.prompt-view[data-socket='Socket-3'][data-visit='2'] .entry",
        ))
        .await
        .unwrap();
    assert!(!entries.is_empty());
    let mut destinations = Vec::new();
    for entry in &entries {
        let text = entry.text().await.unwrap();
        let dest = entry.attr("data-destination").await.unwrap().unwrap();
        let words = match dest.as_str() {
            "system_fold" => "SYSTEM FOLD",
            "inline" => "INLINE",
            "trailing" => "TRAILING MANDATE",
            _ => "DROPPED",
        };
        // Tags are shown in capitals; the words are the label, not a colour.
        assert!(text.to_uppercase().contains(words), "{dest}: {text}");
        assert!(
            text.contains("· rule ") && text.contains("layer L"),
            "{text}"
        );
        destinations.push(dest);
    }
    // The rework reaches the build's next prompt as a trailing mandate.
    assert!(
        destinations.iter().any(|d| d == "trailing"),
        "{destinations:?}"
    );
    assert!(
        destinations.iter().any(|d| d == "system_fold"),
        "{destinations:?}"
    );
}

async fn check_diff(client: &Client, diff: &Path, sandbox: &Sandbox) {
    client.goto(&file_url(diff)).await.unwrap();
    assert_eq!(client.title().await.unwrap(), "castlog diff: a vs b");
    let first = client
        .find(Locator::Css("#first-divergence"))
        .await
        .unwrap();
    assert_eq!(
        first.attr("data-key").await.unwrap().as_deref(),
        Some("Socket-3 WI-2 #3")
    );
    let text = first.text().await.unwrap();
    assert!(text.contains("first divergence"), "{text}");
    assert!(text.contains(&format!("+{RECAST_REPLY}")), "{text}");
    // Every step before it is the same.
    let before: Value = client
        .execute(
            "const all = Array.from(document.querySelectorAll('section.step'));\
             const at = all.findIndex(s => s.id === 'first-divergence');\
             return all.slice(0, at).map(s => s.dataset.status);",
            vec![],
        )
        .await
        .unwrap();
    let before = before.as_array().unwrap();
    assert!(
        !before.is_empty() && before.iter().all(|s| s == "same"),
        "{before:?}"
    );
    // The page opens scrolled to the diff's first divergence for the screenshot.
    client
        .execute(
            "document.getElementById('first-divergence').scrollIntoView();",
            vec![],
        )
        .await
        .unwrap();
    client
        .execute("window.scrollBy(0, -220);", vec![])
        .await
        .unwrap();
    let shot = client.screenshot().await.unwrap();
    assert_shows_a_page(&shot, "diff");
    std::fs::write(sandbox.path("diff.png"), &shot).unwrap();
    keep_for_readme(&shot, "diff.png");
}

/// The report of a cast with more visits and prompts than one list holds (the synthetic
/// workload of `bench synth`, 40 items of 3 tries): its lists are packed until opened.
fn long_cast_report(sandbox: &Sandbox) -> PathBuf {
    let db = sandbox.path("long.db");
    let made = sandbox.run_on(
        &db,
        &[
            "bench",
            "synth",
            "--items",
            "40",
            "--output-bytes",
            "200",
            "--durability",
            "normal",
            "--json",
        ],
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    let casts = sandbox.run_on(&db, &["casts", "--json"]).json();
    let cast = casts["casts"][0]["cast"].as_str().unwrap().to_owned();
    let file = sandbox.path("long.html");
    let run = sandbox.run_on(&db, &["report", &cast, "-o", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.contains("<details class=\"chunk\" data-z=\""));
    assert!(!html.contains("class=\"visit\""), "the visits are packed");
    file
}

/// Opening a packed list with the keyboard inflates it in place.
async fn check_packed_lists(client: &Client, report: &Path) {
    client.goto(&file_url(report)).await.unwrap();
    let count = "return document.querySelectorAll('#timeline section.visit').length;";
    assert_eq!(client.execute(count, vec![]).await.unwrap(), json!(0));
    let first = client
        .find(Locator::Css("#timeline details.chunk > summary"))
        .await
        .unwrap();
    first.send_keys(" ").await.unwrap();
    // Inflating is asynchronous: the page is asked again until the visits are there.
    let mut shown = 0;
    for _ in 0..200 {
        shown = client
            .execute(count, vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap();
        if shown > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(shown, 100, "the first list's visits, inflated");
    let packed = "return document.querySelectorAll('details.chunk[data-z]').length;";
    let left = client
        .execute(packed, vec![])
        .await
        .unwrap()
        .as_u64()
        .unwrap();
    assert!(left >= 2, "{left} lists still packed");
}

#[test]
fn the_report_and_the_diff_show_in_a_real_browser() {
    let Some(program) = chromedriver() else {
        assert!(
            std::env::var_os("CASTLOG_REQUIRE_BROWSER").is_none(),
            "CASTLOG_REQUIRE_BROWSER is set but chromedriver is not on the PATH (apt-get install chromium chromium-driver)"
        );
        println!(
            "skipping the browser test: chromedriver is not on the PATH (apt-get install chromium chromium-driver; CASTLOG_REQUIRE_BROWSER=1 makes this a failure)"
        );
        return;
    };
    let sandbox = Sandbox::new();
    repaired_reworked_recast(&sandbox);
    let report = write_report(&sandbox, "a", None, "a.html");
    let diff = write_report(&sandbox, "a", Some("b"), "diff.html");
    let long = long_cast_report(&sandbox);
    let driver = Driver::start(&program);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = session(&driver).await;
        check_report(&client, &report, &sandbox).await;
        check_diff(&client, &diff, &sandbox).await;
        check_packed_lists(&client, &long).await;
        client.close().await.unwrap();
    });
}
