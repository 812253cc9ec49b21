import Foundation

/// Bandwidth limits as curl and aria2 write them (`500K`, `2M`, `1.5M`, `1G`: K = 1024) and as ferry prints
/// them (`2 MiB/s`, `512KiB`), or with SI units (`2MB` = 2,000,000 bytes per second); `B` for bytes per
/// second; `0` or `off` for none. A plain number of at least 1024 is bytes per second, as curl takes it; a
/// smaller one is refused (a forgotten unit: `100` would be 100 bytes per second).
public enum RateText {
    /// The units, longest first: binary as ferry prints them and as curl's letters mean, SI as their symbols say.
    private static let units: [(suffix: String, factor: Double)] = [
        ("kib", 1024), ("mib", 1_048_576), ("gib", 1_073_741_824),
        ("kb", 1e3), ("mb", 1e6), ("gb", 1e9),
        ("k", 1024), ("m", 1_048_576), ("g", 1_073_741_824), ("b", 1),
    ]
    /// Below this, a number without a unit is taken for a forgotten unit.
    static let plainFloor: Double = 1024

    /// Bytes per second, or nil for unlimited. Throws a message naming the text.
    public static func parse(_ text: String) throws(UsageError) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let shown = TerminalSafe.sanitize(trimmed)
        let lower = trimmed.lowercased()
        if lower == "off" || lower == "none" || lower == "unlimited" { return nil }
        var rest = Substring(lower)
        if rest.hasSuffix("/s") { rest = rest.dropLast(2) }
        var factor: Double?
        for unit in units where rest.hasSuffix(unit.suffix) {
            rest = rest.dropLast(unit.suffix.count)
            factor = unit.factor
            break
        }
        // `2 MiB/s` as ferry prints it: one blank between the number and its unit.
        if factor != nil, rest.last == " " { rest = rest.dropLast() }
        if rest.first == "-", rest.dropFirst().allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), rest.contains(where: \.isNumber) {
            throw UsageError("a rate cannot be negative: '\(shown)' (0 or off for no limit)")
        }
        guard !rest.isEmpty, rest.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(rest), value.isFinite else {
            throw UsageError("not a rate: '\(shown)' (expected e.g. 500K, 2M, 1.5MiB, 2MB, or 0 for no limit)")
        }
        if factor == nil, value > 0, value < plainFloor {
            throw UsageError("'\(shown)' would be \(shown) bytes per second: write \(shown)B if that is meant, or \(shown)K, \(shown)M")
        }
        let bytes = value * (factor ?? 1)
        guard bytes < 1e15 else { throw UsageError("rate too large: '\(shown)'") }
        let rounded = Int64(bytes.rounded())
        if rounded == 0 && value > 0 { throw UsageError("rate too small: '\(shown)' (under 1 byte/s)") }
        return rounded == 0 ? nil : rounded
    }

    /// A limit as it is typed (`2M`, `512K`, `1.5M`, `off`): what a prompt starts from.
    public static func typed(_ rate: Int64?) -> String {
        guard let rate else { return "off" }
        for (suffix, unit) in [("G", Int64(1) << 30), ("M", Int64(1) << 20), ("K", Int64(1) << 10)] where rate >= unit {
            let value = Double(rate) / Double(unit)
            if value == value.rounded() { return "\(Int64(value))\(suffix)" }
            if (value * 10) == (value * 10).rounded() { return String(format: "%.1f%@", value, suffix) }
        }
        return "\(rate)"
    }

    /// The way ferry shows a limit: `2 MiB/s`, or `unlimited`.
    public static func describe(_ rate: Int64?) -> String {
        rate.map { ByteFormat.rate(Double($0)) } ?? "unlimited"
    }
}

/// A timetable for the global download limit, like rclone's: `08:00,512K 23:00,off` means 512 KiB/s from
/// 08:00 and no limit from 23:00, every day, in local time.
public struct LimitSchedule: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        /// Minutes after midnight.
        public var minute: Int
        public var rate: Int64?
    }

    public var entries: [Entry]

    public static func parse(_ text: String) throws(UsageError) -> LimitSchedule {
        var entries: [Entry] = []
        for token in text.split(whereSeparator: \.isWhitespace) {
            let parts = token.split(separator: ",", maxSplits: 1)
            let time = parts.first.map(String.init) ?? ""
            let clock = time.split(separator: ":")
            guard parts.count == 2, clock.count == 2, let hour = Int(clock[0]), let minute = Int(clock[1]),
                  (0..<24).contains(hour), (0..<60).contains(minute), clock[1].count == 2 else {
                throw UsageError("not a schedule entry: '\(TerminalSafe.sanitize(String(token)))' (expected HH:MM,RATE such as 08:00,512K)")
            }
            entries.append(Entry(minute: hour * 60 + minute, rate: try RateText.parse(String(parts[1]))))
        }
        guard !entries.isEmpty else { throw UsageError("an empty schedule (expected e.g. \"08:00,512K 23:00,off\")") }
        entries.sort { $0.minute < $1.minute }
        return LimitSchedule(entries: entries)
    }

    /// The rate in force at `date` (the last entry of the day before, before the first of the day).
    public func rate(at date: Date, calendar: Calendar = .current) -> Int64? {
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        let now = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        return (entries.last { $0.minute <= now } ?? entries.last!).rate
    }

    /// The next moment the rate may change after `date`.
    public func nextChange(after date: Date, calendar: Calendar = .current) -> Date {
        let start = calendar.startOfDay(for: date)
        for day in 0...1 {
            for entry in entries {
                if let moment = calendar.date(byAdding: .minute, value: entry.minute + day * 24 * 60, to: start), moment > date {
                    return moment
                }
            }
        }
        return date.addingTimeInterval(24 * 3600)
    }
}
