/// A request's `send-at`: when a scheduled notification is to go out, as
/// milliseconds since the UNIX epoch. The request gives it as RFC 3339 text
/// (`2026-11-27T18:30:00Z`, `2026-11-27T19:30:00.250+01:00`) or as epoch
/// milliseconds.
public enum SendAt {
    /// Milliseconds since the epoch of an RFC 3339 date-time (`T` or a space
    /// between date and time, either case; fractional seconds to any length,
    /// read to the millisecond; `Z` or a `±hh:mm` offset), or nil.
    public static func milliseconds(rfc3339 text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in i..<(i + n) {
                guard b[k] >= 0x30, b[k] <= 0x39 else { return nil }
                v = v * 10 + Int(b[k] - 0x30)
            }
            i += n
            return v
        }
        func expect(_ c: UInt8...) -> Bool {
            guard i < b.count, c.contains(b[i]) else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2),
            expect(0x54, 0x74, 0x20), let hour = digits(2), expect(0x3A), let minute = digits(2), expect(0x3A), let second = digits(2)
        else { return nil }
        var millis = 0
        if i < b.count, b[i] == 0x2E {
            i += 1
            var scale = 100, any = false
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                millis += Int(b[i] - 0x30) * scale
                scale /= 10
                any = true
                i += 1
            }
            guard any else { return nil }
        }
        var offset = 0
        if expect(0x5A, 0x7A) {
        } else if i < b.count, b[i] == 0x2B || b[i] == 0x2D {
            let sign = b[i] == 0x2D ? -1 : 1
            i += 1
            guard let oh = digits(2), expect(0x3A), let om = digits(2), oh <= 23, om <= 59 else { return nil }
            offset = sign * (oh * 60 + om) * 60
        } else {
            return nil
        }
        guard i == b.count, year <= 9999, (1...12).contains(month), day >= 1, day <= daysIn(month, year), hour <= 23, minute <= 59, second <= 60 else { return nil }
        let seconds = daysFromEpoch(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + min(second, 59) - offset
        return Int64(seconds) * 1_000 + Int64(millis)
    }

    /// An epoch-milliseconds `send-at` below this is taken for seconds (10^11 ms is March 1973).
    public static let smallestMilliseconds: Int64 = 100_000_000_000
    /// The last millisecond of year 9999: a later `send-at` is a mistake.
    public static let largestMilliseconds: Int64 = 253_402_300_799_999

    static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the date (proleptic Gregorian; Howard Hinnant's days_from_civil).
    static func daysFromEpoch(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
