import Foundation

/// A prompt line in the footer (label, text, a block cursor) and, on the row above, its error or what Tab found.
enum PromptView {
    static func render(_ prompt: AppState.Prompt, folder: String, _ context: RenderContext, into canvas: inout Canvas, y: Int) {
        if let above = prompt.error ?? prompt.hint, y >= 2 {
            canvas.fill(x: 0, y: y - 1, count: canvas.width)
            canvas.put(context.outside(DisplayWidth.truncate(above, to: canvas.width, ellipsis: context.ellipsis)),
                       x: 0, y: y - 1, style: prompt.error != nil ? Palette.error : Palette.dim)
        }
        let hint = "  (Enter accept, Esc abandon)"
        let label = context.outside(prompt.label(folder: shortened(folder, to: max(12, canvas.width / 3), context)))
        // The text is the user's own but may be pasted from anywhere: made safe like outside text. Only what
        // the row shows is looked at (a paste of 2,000 URLs, 113 KB, took 80 s to show when every frame
        // measured the text before the cursor again for each character it dropped from the front).
        let chars = Array(prompt.editor.text)
        func cell(_ index: Int) -> String { context.outside(String(chars[index])) }
        // The label gives way to what is typed (up to 24 columns of it and the cursor), never below half the row:
        // at 40 columns the add prompt showed its label and nothing of what was typed.
        var typedWidth = 0
        for index in chars.indices where typedWidth < 24 { typedWidth += DisplayWidth.of(cell(index)) }
        let typed = min(24, typedWidth + 2)  // and the last column, left blank
        let labelRoom = max(canvas.width / 2, canvas.width - typed)
        var x = canvas.put(DisplayWidth.truncate(label, to: labelRoom, ellipsis: context.ellipsis), x: 0, y: y, style: Palette.label)
        let room = max(1, canvas.width - x - 1)
        let cursor = min(prompt.editor.cursor, chars.count)
        // Keep the cursor in view: as much of the text before it as fits, then what follows.
        var start = cursor
        var before = 0
        while start > 0, before + DisplayWidth.of(cell(start - 1)) < room {
            before += DisplayWidth.of(cell(start - 1))
            start -= 1
        }
        for index in start..<chars.count {
            let text = cell(index)
            guard x + DisplayWidth.of(text) <= canvas.width - 1 else { break }
            // A selected value (what typing replaces) is shown as a selection: reverse, like the cursor.
            x = canvas.put(text, x: x, y: y, style: index == cursor || prompt.editor.selected ? Style(reverse: true) : .plain)
        }
        if cursor >= chars.count, x < canvas.width { x = canvas.put(" ", x: x, y: y, style: Style(reverse: true)) }
        if chars.isEmpty, x + DisplayWidth.of(hint) <= canvas.width { canvas.put(hint, x: x, y: y, style: Palette.dim) }
    }

    /// A folder as a label shows it: `~` for the home directory, its end when long (`…/b/downloads`).
    static func shortened(_ folder: String, to width: Int, _ context: RenderContext, home: String = NSHomeDirectory()) -> String {
        var text = folder == home ? "~" : folder.hasPrefix(home + "/") ? "~" + folder.dropFirst(home.count) : folder
        guard DisplayWidth.of(text) > width else { return text }
        while DisplayWidth.of(text) > max(1, width - 1), !text.isEmpty { text.removeFirst() }
        return context.ellipsis + text
    }
}
