import Foundation

/// HTTP dates (RFC 9110 section 5.6.7), parsed and formatted by hand: independent of the process locale and time zone.
public enum HTTPDate {
    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    static let shortDays = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    static let longDays = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
    static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    /// Seconds from 1970 of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the range `format` can write.
    static let earliest: Int64 = -62_135_596_800
    static let latest: Int64 = 253_402_300_799

    /// Parses IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime
    /// ("Sun Nov  6 08:49:37 1994"); nil otherwise.
    /// Lenient in small ways: surrounding white space, any letter case, runs of spaces, "UTC" for "GMT", a short or long
    /// day name before the comma, "-" or " " between day, month and year, 2- or 4-digit years, 1- or 2-digit days.
    /// The day name must be a real one but is not checked against the date; the date itself must exist.
    /// A 2-digit year is put in the century that makes it at most 50 years in the future (RFC 9110).
    public static func parse(_ s: String) -> Date? {
        parse(s, now: Date())
    }

    static func parse(_ s: String, now: Date) -> Date? {
        let text = s.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, text.utf8.count <= 64 else { return nil }
        var c = Cursor(Array(text.utf8))
        let dayName = c.letters()
        let year: Int, month: Int, day: Int, time: (Int, Int, Int)
        if c.take(UInt8(ascii: ",")) {
            // IMF-fixdate or RFC 850
            guard shortDays.contains(dayName) || longDays.contains(dayName), c.spaces() >= 1,
                  let d = c.number(maxDigits: 2) else { return nil }
            let dashed = c.take(UInt8(ascii: "-"))
            guard dashed || c.spaces() >= 1, let m = months.firstIndex(of: c.letters()) else { return nil }
            guard dashed ? c.take(UInt8(ascii: "-")) : c.spaces() >= 1 else { return nil }
            guard let y = c.number(maxDigits: 4), y.digits == 2 || y.digits == 4,
                  c.spaces() >= 1, let t = c.time(), c.spaces() >= 1 else { return nil }
            let zone = c.letters()
            guard zone == "gmt" || zone == "utc", c.atEnd else { return nil }
            year = y.digits == 2 ? fullYear(twoDigit: y.value, now: now) : y.value
            month = m + 1
            day = d.value
            time = t
        } else {
            // asctime: "Sun Nov  6 08:49:37 1994"
            guard shortDays.contains(dayName), c.spaces() >= 1, let m = months.firstIndex(of: c.letters()),
                  c.spaces() >= 1, let d = c.number(maxDigits: 2), c.spaces() >= 1, let t = c.time(),
                  c.spaces() >= 1, let y = c.number(maxDigits: 4), y.digits == 4, c.atEnd
            else { return nil }
            year = y.value
            month = m + 1
            day = d.value
            time = t
        }
        return utc(year: year, month: month, day: day, hour: time.0, minute: time.1, second: time.2)
    }

    /// A time in UTC from its parts (month 1-12), without a Calendar (a listing's 2,000 dates made one each);
    /// nil for a day, hour, minute or second out of its range.
    public static func utc(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int = 0) -> Date? {
        guard year >= 1, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT". Fractions of a second are dropped;
    /// dates outside years 1...9999 (or not finite) are clamped into that range.
    public static func format(_ date: Date) -> String {
        let t = date.timeIntervalSince1970
        let seconds: Int64
        if t.isNaN {
            seconds = 0
        } else if t <= TimeInterval(earliest) {
            seconds = earliest
        } else if t >= TimeInterval(latest) {
            seconds = latest
        } else {
            seconds = Int64(t.rounded(.down))
        }
        let days = floorDiv(seconds, 86_400)
        let rem = Int(seconds - days * 86_400)
        let (y, m, d) = civilFromDays(Int(days))
        let weekday = Int(((days % 7) + 7 + 4) % 7)  // 1970-01-01 was a Thursday
        return "\(dayNames[weekday]), \(pad(d, 2)) \(monthNames[m - 1]) \(pad(y, 4)) "
            + "\(pad(rem / 3600, 2)):\(pad(rem / 60 % 60, 2)):\(pad(rem % 60, 2)) GMT"
    }

    // MARK: Calendar arithmetic (proleptic Gregorian, after H. Hinnant's algorithms)

    static func fullYear(twoDigit yy: Int, now: Date) -> Int {
        let t = now.timeIntervalSince1970
        let clamped = t.isFinite ? min(max(t, TimeInterval(earliest)), TimeInterval(latest)) : 0
        let nowYear = civilFromDays(Int(floorDiv(Int64(clamped), 86_400))).year
        var year = (nowYear / 100) * 100 + yy
        if year > nowYear + 50 { year -= 100 }
        if year <= nowYear - 50 { year += 100 }
        return year
    }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400
        return (m <= 2 ? y + 1 : y, m, d)
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    static func pad(_ n: Int, _ width: Int) -> String {
        let s = String(n)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    /// A tiny ASCII scanner.
    struct Cursor {
        let b: [UInt8]
        var i = 0
        init(_ b: [UInt8]) { self.b = b }

        var atEnd: Bool { i == b.count }

        mutating func take(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }

        /// Skips spaces and tabs; returns how many.
        mutating func spaces() -> Int {
            let start = i
            while i < b.count, b[i] == UInt8(ascii: " ") || b[i] == UInt8(ascii: "\t") { i += 1 }
            return i - start
        }

        /// ASCII letters, lower-cased (at most 16 read; more fail later because the caller expects a known word).
        mutating func letters() -> String {
            var out: [UInt8] = []
            while i < b.count, out.count <= 16 {
                let c = b[i] | 0x20
                guard c >= UInt8(ascii: "a"), c <= UInt8(ascii: "z") else { break }
                out.append(c)
                i += 1
            }
            return String(decoding: out, as: UTF8.self)
        }

        /// 1...maxDigits ASCII digits.
        mutating func number(maxDigits: Int) -> (value: Int, digits: Int)? {
            var value = 0
            var n = 0
            while i < b.count, n < maxDigits, b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") {
                value = value * 10 + Int(b[i] - UInt8(ascii: "0"))
                n += 1
                i += 1
            }
            // A longer run of digits is not a number of this field.
            if n == 0 || (i < b.count && b[i] >= UInt8(ascii: "0") && b[i] <= UInt8(ascii: "9")) { return nil }
            return (value, n)
        }

        /// "HH:MM:SS", exactly two digits each.
        mutating func time() -> (Int, Int, Int)? {
            guard let h = number(maxDigits: 2), h.digits == 2, take(UInt8(ascii: ":")),
                  let m = number(maxDigits: 2), m.digits == 2, take(UInt8(ascii: ":")),
                  let s = number(maxDigits: 2), s.digits == 2 else { return nil }
            return (h.value, m.value, s.value)
        }
    }
}

/// The Retry-After header (RFC 9110 section 10.2.3).
public enum RetryAfter {
    /// Delay asked by a Retry-After value: delta-seconds (non-negative integer, surrounding white space allowed) or an
    /// HTTP-date relative to `now` (a date in the past gives 0). nil for anything else (negative numbers, garbage, empty).
    /// Absurdly long digit strings still give their (huge) value; callers cap the delay.
    public static func delay(_ value: String, now: Date) -> TimeInterval? {
        let text = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return nil }
        if text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            if let n = Int64(text) { return TimeInterval(n) }
            // Too big for Int64: the (huge) value, kept finite.
            return TimeInterval(text).map { $0.isFinite ? $0 : .greatestFiniteMagnitude }
        }
        guard let date = HTTPDate.parse(text, now: now) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
