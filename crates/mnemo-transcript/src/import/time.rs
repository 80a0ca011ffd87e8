//! RFC 3339 timestamps (`2026-01-05T09:30:00.123Z`, `...+02:00`) as Unix milliseconds, parsed by
//! the `time` crate (decision 0130), which checks the calendar: `2026-02-31` is refused.

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Parses an RFC 3339 date-time into Unix milliseconds (fractions beyond milliseconds truncated).
pub(crate) fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let parsed = OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| format!("{text:?} is not an RFC 3339 timestamp (like 2026-01-05T09:30:00.123Z): {e}"))?;
    let millis = parsed.unix_timestamp_nanos().div_euclid(1_000_000);
    u64::try_from(millis).map_err(|_| format!("{text:?} is before 1970"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]
    use super::parse_rfc3339_ms;

    #[test]
    fn known_instants() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(parse_rfc3339_ms("2026-01-01T00:00:00Z").unwrap(), 1_767_225_600_000);
        assert_eq!(parse_rfc3339_ms("2025-10-29T00:59:38.317Z").unwrap(), 1_761_699_578_317);
        assert_eq!(parse_rfc3339_ms("2026-01-01T02:00:00.5+02:00").unwrap(), 1_767_225_600_500);
        assert_eq!(parse_rfc3339_ms("2024-02-29T12:00:00.123456Z").unwrap(), 1_709_208_000_123);
        assert_eq!(parse_rfc3339_ms("2025-12-31T23:30:00-01:00").unwrap(), 1_767_227_400_000);
        for bad in
            ["2026-01-01", "2026-13-01T00:00:00Z", "yesterday", "2026-01-01T00:00:00", "1969-12-31T23:59:59Z"]
        {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn impossible_calendar_dates_are_refused() {
        for bad in
            ["2026-02-31T00:00:00Z", "2026-02-29T00:00:00Z", "2026-04-31T10:00:00Z", "2026-06-00T00:00:00Z"]
        {
            let error = parse_rfc3339_ms(bad).unwrap_err();
            assert!(error.contains(bad), "{error}");
        }
        assert!(parse_rfc3339_ms("2028-02-29T00:00:00Z").is_ok(), "2028 is a leap year");
    }
}
