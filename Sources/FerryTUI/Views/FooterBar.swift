import FerryCore

/// The bottom row: a question, a prompt, the message of the moment, or the main keys from the keymap.
enum FooterBar {
    /// `selected`: the item the keys act on (its state decides which keys are offered).
    static func render(_ state: AppState, selected: TransferSnapshot?, _ context: RenderContext, into canvas: inout Canvas) {
        let y = canvas.height - 1
        guard y >= 1 else { return }
        canvas.fill(x: 0, y: y, count: canvas.width)
        if let question = state.confirmation {
            canvas.put(context.ascii(DisplayWidth.truncate(question.question, to: canvas.width, ellipsis: context.ellipsis)),
                       x: 0, y: y, style: Palette.question)
            return
        }
        if let prompt = state.prompt {
            PromptView.render(prompt, folder: state.downloadDirectory, context, into: &canvas, y: y)
            return
        }
        if let message = state.message {
            canvas.put(context.ascii(DisplayWidth.truncate(message.text, to: canvas.width, ellipsis: context.ellipsis)),
                       x: 0, y: y, style: message.isError ? Palette.error : .plain)
            return
        }
        var entries = context.keymap.footerEntries(onList: state.screen == .list, selected: selected?.state).map { (key: context.unicode ? $0.key.label : $0.key.asciiLabel, label: $0.label) }
        switch state.screen {
        case .list where !state.marks.isEmpty: entries.insert((key: "Esc", label: "Unmark"), at: 1)
        case .list where state.openTree != nil: entries.insert((key: "Esc", label: "Up"), at: 0)
        case .list: break
        case .detail: entries.insert((key: "Esc", label: "Back"), at: 0)
        case .help: entries = [(key: "Esc", label: "Back"), (key: "j/k", label: "Scroll")]
        }
        // Crowded, the entries before the last give way from the end: the last (q Detach) stays in sight, as
        // htop keeps Quit (at 80 columns it and / Filter were cut).
        func width(_ entry: (key: String, label: String)) -> Int { DisplayWidth.of(entry.key) + DisplayWidth.of(entry.label) + 3 }
        while entries.count > 2, entries.map(width).reduce(0, +) - 2 > canvas.width { entries.remove(at: entries.count - 2) }
        var x = 0
        for entry in entries {
            let need = DisplayWidth.of(entry.key) + DisplayWidth.of(entry.label) + 1
            guard x + need <= canvas.width else { break }
            x = canvas.put(entry.key, x: x, y: y, style: Palette.footerKey)
            x = canvas.put(" " + entry.label, x: x, y: y)
            x += 2
        }
    }
}
