//! RFC 3339 timestamps (`2026-01-05T09:30:00.123Z`, `...+02:00`) as Unix milliseconds: the one
//! date format the imported transcripts use, parsed here rather than with a date library.

/// Parses an RFC 3339 date-time into Unix milliseconds (fractions beyond milliseconds truncated).
pub(crate) fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not an RFC 3339 timestamp (like 2026-01-05T09:30:00.123Z)");
    let bytes = text.as_bytes();
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return Err(bad());
    }
    let number = |range: std::ops::Range<usize>| -> Result<i64, String> {
        let digits = text.get(range).ok_or_else(bad)?;
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        digits.parse::<i64>().map_err(|_| bad())
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return Err(bad());
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let padded = format!("{:0<3}", &fraction[..digits.min(3)]);
        millis = padded.parse::<i64>().map_err(|_| bad())?;
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(rest.as_bytes()[0], b'+' | b'-') && rest.as_bytes()[3] == b':' => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let hours: i64 = rest[1..3].parse().map_err(|_| bad())?;
            let minutes: i64 = rest[4..6].parse().map_err(|_| bad())?;
            sign * (hours * 60 + minutes)
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    u64::try_from(seconds * 1_000 + millis).map_err(|_| format!("{text:?} is before 1970"))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
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
        for bad in
            ["2026-01-01", "2026-13-01T00:00:00Z", "yesterday", "2026-01-01T00:00:00", "1969-12-31T23:59:59Z"]
        {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad}");
        }
    }
}
