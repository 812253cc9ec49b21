import Foundation

/// Bandwidth limits as curl and aria2 write them: `500K`, `2M`, `1.5M`, `1G` (K = 1024), a plain number of
/// bytes per second, `0` or `off` for none.
public enum RateText {
    /// Bytes per second, or nil for unlimited. Throws a message naming the text.
    public static func parse(_ text: String) throws(UsageError) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let lower = trimmed.lowercased()
        if lower == "off" || lower == "none" || lower == "unlimited" { return nil }
        var digits = lower
        var factor: Double = 1
        if let last = lower.last, let multiplier = ["k": 1024.0, "m": 1024.0 * 1024, "g": 1024.0 * 1024 * 1024][String(last)] {
            digits = String(lower.dropLast())
            factor = multiplier
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(digits), value.isFinite else {
            throw UsageError("not a rate: '\(TerminalSafe.sanitize(trimmed))' (expected e.g. 500K, 2M, 1.5M, or 0 for no limit)")
        }
        let bytes = value * factor
        guard bytes < 1e15 else { throw UsageError("rate too large: '\(TerminalSafe.sanitize(trimmed))'") }
        let rounded = Int64(bytes.rounded())
        if rounded == 0 && value > 0 { throw UsageError("rate too small: '\(TerminalSafe.sanitize(trimmed))' (under 1 byte/s)") }
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
