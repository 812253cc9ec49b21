/// The keys, generated from the keymap (so help cannot drift from what the keys do), in as many columns as fit;
/// a section stays whole in one column, under its heading (a column began with a section's last keys and no
/// heading).
enum HelpView {
    typealias Line = (String, Style)

    /// The sections: a heading and its keys each.
    static func sections(_ context: RenderContext) -> [[Line]] {
        var sections: [[Line]] = []
        for section in Keymap.Section.allCases {
            var lines: [Line] = [(section.rawValue, Palette.label)]
            for binding in context.keymap.bindings where binding.section == section {
                let keys = binding.keys.map { context.unicode ? $0.label : $0.asciiLabel }.joined(separator: " ")
                lines.append(("  " + DisplayWidth.pad(keys, to: 9, ellipsis: nil) + " " + binding.help, .plain))
            }
            sections.append(lines)
        }
        sections.append([("Prompts", Palette.label), ("  Enter     accept", .plain), ("  Esc       abandon", .plain),
                         ("  Tab       complete a path; folder, method", .plain), ("  ← → ^A ^E move the cursor", .plain), ("  ^U ^W     delete back, a word", .plain),
                         ("  y n       answer a question", .plain)])
        return sections.map { $0.map { (context.ascii($0.0), $0.1) } }
    }

    /// Every line in one column, a blank line between sections.
    static func lines(_ context: RenderContext) -> [Line] {
        sections(context).enumerated().flatMap { index, section in (index == 0 ? [] : [("", Style.plain)]) + section }
    }

    static let columnWidth = 40

    /// The sections dealt into at most `count` columns in order, whole, the tallest column as short as it can be
    /// (every way of cutting the few sections is tried).
    static func columns(_ sections: [[Line]], count: Int) -> [[Line]] {
        func height(_ run: ArraySlice<[Line]>) -> Int { run.reduce(0) { $0 + $1.count } + max(0, run.count - 1) }
        func join(_ run: ArraySlice<[Line]>) -> [Line] {
            run.enumerated().flatMap { index, section in (index == 0 ? [] : [("", Style.plain)]) + section }
        }
        // The best cuts of sections[start...] into `left` columns: (tallest, cut positions).
        func best(_ start: Int, _ left: Int) -> (Int, [Int]) {
            if left == 1 || start == sections.count - 1 { return (height(sections[start...]), []) }
            var found = (Int.max, [Int]())
            for end in (start + 1)..<sections.count {
                let rest = best(end, left - 1)
                let tallest = max(height(sections[start..<end]), rest.0)
                if tallest < found.0 { found = (tallest, [end] + rest.1) }
            }
            let whole = height(sections[start...])
            return whole <= found.0 ? (whole, []) : found
        }
        guard !sections.isEmpty else { return [] }
        let cuts = [0] + best(0, max(1, count)).1 + [sections.count]
        return zip(cuts, cuts.dropFirst()).map { join(sections[$0..<$1]) }
    }

    static func render(_ state: AppState, _ context: RenderContext, into canvas: inout Canvas, top: Int, rows: Int) {
        guard rows > 0 else { return }
        let count = max(1, min(3, canvas.width / columnWidth))
        let dealt = columns(sections(context), count: count)
        let tallest = dealt.map(\.count).max() ?? 0
        let scroll = min(state.helpScroll, max(0, tallest - rows))
        for (column, lines) in dealt.enumerated() {
            let x = column * (canvas.width / count) + 1
            let width = canvas.width / count - 2
            for row in 0..<rows {
                let index = scroll + row
                guard index < lines.count else { break }
                let (text, style) = lines[index]
                canvas.put(DisplayWidth.truncate(text, to: width, ellipsis: context.ellipsis), x: x, y: top + row, style: style)
            }
        }
    }
}
