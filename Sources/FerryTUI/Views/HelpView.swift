/// The keys, generated from the keymap (so help cannot drift from what the keys do), in as many columns as fit.
enum HelpView {
    static func lines(_ context: RenderContext) -> [(String, Style)] {
        var lines: [(String, Style)] = []
        for section in Keymap.Section.allCases {
            if !lines.isEmpty { lines.append(("", .plain)) }
            lines.append((section.rawValue, Palette.label))
            for binding in context.keymap.bindings where binding.section == section {
                let keys = binding.keys.map { context.unicode ? $0.label : $0.asciiLabel }.joined(separator: " ")
                lines.append(("  " + DisplayWidth.pad(keys, to: 9, ellipsis: nil) + " " + binding.help, .plain))
            }
        }
        lines.append(("", .plain))
        lines.append(("Prompts", Palette.label))
        lines.append(("  Enter     accept", .plain))
        lines.append(("  Esc       abandon", .plain))
        lines.append(("  ← → ^A ^E move the cursor", .plain))
        lines.append(("  ^U ^W     delete back, a word", .plain))
        lines.append(("  y n       answer a question", .plain))
        return lines.map { (context.ascii($0.0), $0.1) }
    }

    static let columnWidth = 40

    static func render(_ state: AppState, _ context: RenderContext, into canvas: inout Canvas, top: Int, rows: Int) {
        guard rows > 0 else { return }
        let all = lines(context)
        let columns = max(1, min(3, canvas.width / columnWidth))
        let perColumn = columns == 1 ? all.count : (all.count + columns - 1) / columns
        let scroll = min(state.helpScroll, max(0, perColumn - rows))
        for column in 0..<columns {
            let x = column * (canvas.width / columns) + 1
            let width = canvas.width / columns - 2
            for row in 0..<rows {
                let index = column * perColumn + scroll + row
                guard index < min(all.count, (column + 1) * perColumn) else { break }
                let (text, style) = all[index]
                canvas.put(DisplayWidth.truncate(text, to: width, ellipsis: context.ellipsis), x: x, y: top + row, style: style)
            }
        }
    }
}
