//! The layered-stack exercise, reproduced exactly under tokio's paused clock: the table that
//! `examples/layered.rs` prints must be the exercise's, row by row (the same rows as
//! `sim trace scenarios/layered-stack.ron`).

#[allow(dead_code)] // its `main` is for `cargo run --example layered`
#[path = "../examples/layered.rs"]
mod layered;

const EXPECTED: &str = r" request  time breaker    answered by                primary calls
       1    5s closed     breaker(retry(primary))    1
       2   10s closed     breaker(retry(primary))    2
       3   15s closed     retry(backup)              4
       4   20s closed     retry(backup)              6
       5   25s open       retry(backup)              6
       6   30s open       retry(backup)              6
       7   35s open       retry(backup)              6
       8   40s half-open  retry(backup)              8
       9   45s open       retry(backup)              8
      10   50s open       retry(backup)              8
      11   55s open       retry(backup)              8
      12   60s half-open  breaker(retry(primary))    9
";

#[tokio::test(start_paused = true)]
async fn the_exercise_table_row_by_row() {
    let table = layered::table().await.expect("every request is answered");
    print!("{table}");
    for (got, want) in table.lines().zip(EXPECTED.lines()) {
        assert_eq!(
            got.split_whitespace().collect::<Vec<_>>(),
            want.split_whitespace().collect::<Vec<_>>()
        );
    }
    assert_eq!(table, EXPECTED);
}
