import Foundation

/// Human-readable sizes, rates and durations for the terminal. Locale-independent ("." as decimal separator).
public enum ByteFormat {
    static let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]

    /// Binary units with one decimal from KiB up: 0 -> "0 B", 1023 -> "1023 B", 1536 -> "1.5 KiB", 10*1024*1024 -> "10.0 MiB",
    /// then GiB, TiB, PiB, EiB. Values that would round to "1024.0" of a unit are shown in the next unit.
    /// Negative values get a leading "-".
    public static func bytes(_ n: Int64) -> String {
        n < 0 ? "-" + format(Double(n.magnitude)) : format(Double(n))
    }

    /// Bytes done of a total, in one unit when both have it: `30.0/100.0 MiB` (`512.0 KiB/2.0 MiB` otherwise).
    public static func progress(_ done: Int64, of total: Int64) -> String {
        let done = bytes(done), whole = bytes(total)
        if let space = done.lastIndex(of: " "), whole.hasSuffix(done[space...]) { return "\(done[..<space])/\(whole)" }
        return "\(done)/\(whole)"
    }

    /// `progress` in `width` columns when it fits, else with short units (`300.0K/1.0G`): a row at 80 columns
    /// cut `300.0 KiB/1.0 GiB` to `300.0 KiB/1.0 …`, its total's unit gone.
    public static func progress(_ done: Int64, of total: Int64, fitting width: Int) -> String {
        let full = progress(done, of: total)
        guard full.count > width else { return full }
        return full.replacingOccurrences(of: " ", with: "").replacingOccurrences(of: "iB", with: "")
    }

    /// "12.3 MiB/s"; from 1000 of a unit without its tenth ("1010 KiB/s", not "1009.7 KiB/s"): every rate fits
    /// the 11 columns the row and the readout give it (a steady 1 MiB/s limit read "1009.7 KiB…"). Negative or
    /// non-finite -> "0 B/s".
    public static func rate(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond > 0 else { return "0 B/s" }
        return format(min(bytesPerSecond, Double(Int64.max)), tenthsBelow1000: true) + "/s"
    }

    /// Compact duration: 5 -> "5s", 65 -> "1m05s", 3725 -> "1h02m", >= 100 h -> "99h+"; negative/non-finite -> "--".
    /// Rounded to the nearest second.
    public static func duration(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "--" }
        guard seconds < 360_000 else { return "99h+" }
        let s = Int(seconds.rounded())
        if s >= 360_000 { return "99h+" }
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(twoDigits(s % 60))s" }
        return "\(s / 3600)h\(twoDigits(s / 60 % 60))m"
    }

    /// `v` is finite and in 0...Int64.max.
    /// `tenthsBelow1000`: from 1000 of a unit, whole ones (rounded from the tenths).
    static func format(_ v: Double, tenthsBelow1000: Bool = false) -> String {
        let whole = v.rounded()
        if whole < 1024 { return "\(Int(whole)) B" }
        var value = v / 1024
        var unit = 0
        while true {
            let tenths = (value * 10).rounded()
            if tenths < 10_240 || unit == units.count - 1 {
                let t = Int64(tenths)
                if tenthsBelow1000, t >= 10_000 { return "\((t + 5) / 10) \(units[unit])" }
                return "\(t / 10).\(t % 10) \(units[unit])"
            }
            value /= 1024
            unit += 1
        }
    }

    static func twoDigits(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
}
