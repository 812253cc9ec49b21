/// A progress bar `width` cells wide: eighth blocks in Unicode, `[####....]` in ASCII.
/// `nil` progress draws an indeterminate bar whose block moves with `phase` (bytes done), so an idle
/// transfer draws the same frame twice and costs nothing.
enum ProgressBar {
    static let eighths: [Character] = ["▏", "▎", "▍", "▌", "▋", "▊", "▉"]

    static func text(progress: Float?, width: Int, unicode: Bool, phase: Int64 = 0) -> String {
        guard width > 0 else { return "" }
        if unicode {
            guard let progress else { return indeterminate(width: width, phase: phase, block: "█", empty: "·") }
            let total = width * 8
            let filled = min(total, max(0, Int((Double(progress) * Double(total)).rounded(.down))))
            var out = String(repeating: "█", count: filled / 8)
            var cells = filled / 8
            if filled % 8 > 0 { out.append(eighths[filled % 8 - 1]); cells += 1 }
            return out + String(repeating: "·", count: width - cells)
        }
        guard width >= 3 else { return String(repeating: "#", count: width) }
        let inner = width - 2
        guard let progress else { return "[" + indeterminate(width: inner, phase: phase, block: "=", empty: ".") + "]" }
        let filled = min(inner, max(0, Int((Double(progress) * Double(inner)).rounded(.down))))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: inner - filled) + "]"
    }

    private static func indeterminate(width: Int, phase: Int64, block: Character, empty: Character) -> String {
        let size = min(3, width)
        let positions = width - size + 1
        let start = Int((phase / 65_536) % Int64(positions))
        return String(repeating: empty, count: start) + String(repeating: block, count: size)
            + String(repeating: empty, count: width - start - size)
    }
}
