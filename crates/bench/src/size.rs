//! Sizes as people write them: `256MiB`, `2GiB`, `500MB`, `1048576`.

use anyhow::{anyhow, bail};

/// Parses a size into bytes (binary units `KiB`/`MiB`/`GiB`, decimal `KB`/`MB`/`GB`, or bytes).
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let number: f64 =
        number.parse().map_err(|_| anyhow!("{text:?} is not a size (e.g. 256MiB, 2GiB, 500MB, 1.5GB)"))?;
    let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => bail!("unknown size unit {other:?} in {text:?} (KiB, MiB, GiB, KB, MB, GB)"),
    };
    let bytes = number * multiplier;
    if !(1.0..=u64::MAX as f64).contains(&bytes) {
        bail!("size {text:?} is out of range");
    }
    Ok(bytes as u64)
}

/// For clap's `value_parser`: checks the text, keeps it as written.
pub fn checked_size(text: &str) -> Result<String, String> {
    parse_size(text).map(|_| text.to_owned()).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn units() {
        assert_eq!(parse_size("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("500MB").unwrap(), 500_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("0").is_err());
    }
}
