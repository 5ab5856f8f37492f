//! Counted nouns in messages: "1 rank", "2 ranks", never "1 ranks"; and
//! the one rule for comma-separated lists. Public so that the tools built
//! on the library (the `ringreduce` command line) word their output and
//! read their lists exactly as the library's errors and parsers do.

/// `one` when `n` is 1, else `many`.
pub fn plural<'a>(n: impl TryInto<u64>, one: &'a str, many: &'a str) -> &'a str {
    match n.try_into() {
        Ok(1) => one,
        _ => many,
    }
}

/// `n` and the noun, singular or plural: `counted(1, "rank")` is `1 rank`,
/// `counted(3, "rank")` is `3 ranks` (nouns whose plural adds an `s`).
pub fn counted(n: impl TryInto<u64> + std::fmt::Display + Copy, noun: &str) -> String {
    let many = format!("{noun}s");
    format!("{n} {}", plural(n, noun, &many))
}

/// The items of a comma-separated list, trimmed. Every list the command
/// line takes follows the same rule: an empty item (`float,,half`, a
/// trailing comma, an empty string) is refused, never skipped.
pub fn list_items(s: &str) -> Result<Vec<&str>, String> {
    let items: Vec<&str> = s.split(',').map(str::trim).collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err(if s.trim().is_empty() {
            "the list is empty".to_string()
        } else {
            format!("{s:?} has an empty item (items are separated by single commas)")
        });
    }
    Ok(items)
}

/// Ranks in words: `rank 2`, `ranks 1 and 2`, `ranks 0, 1 and 3`.
pub(crate) fn rank_list(ranks: &[usize]) -> String {
    match ranks {
        [] => "no rank".into(),
        [r] => format!("rank {r}"),
        [init @ .., last] => format!(
            "ranks {} and {last}",
            init.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests;
