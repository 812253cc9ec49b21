import FerryCore

/// A whole frame: header, the list (or the detail or help view), footer. A pure function of its inputs.
public enum Screen {
    /// - Parameter rows: the list's rows when the caller has them (`state.rows(snapshot)`), so that they are
    ///   worked out once a frame.
    public static func render(_ state: AppState, _ snapshot: QueueSnapshot, _ context: RenderContext, rows: ListRows? = nil) -> Canvas {
        var canvas = Canvas(width: state.width, height: state.height)
        render(state, snapshot, context, into: &canvas, rows: rows)
        return canvas
    }

    public static func render(_ state: AppState, _ snapshot: QueueSnapshot, _ context: RenderContext, into canvas: inout Canvas,
                              rows given: ListRows? = nil) {
        guard canvas.width > 0, canvas.height > 0 else { return }
        // The list's rows, once a frame: the header says where the selection is among them.
        let listed = state.screen == .list ? given ?? state.rows(snapshot) : nil
        HeaderBar.render(state, snapshot, listed, context, into: &canvas)
        let top = 1
        var rows = max(0, canvas.height - 2)
        if state.prompt?.error != nil || state.prompt?.hint != nil { rows = max(0, rows - 1) }
        // The item the keys act on (its state decides which the footer offers), found once a frame.
        let acted: TransferSnapshot?
        switch state.screen {
        case .list:
            acted = state.selectedItem(snapshot)
            TransferList.render(state, snapshot, listed ?? state.rows(snapshot), context, into: &canvas, top: top, rows: rows)
        case let .detail(id):
            acted = snapshot.items.first { $0.id == id }
            DetailView.render(acted, scroll: state.detailScroll, context, into: &canvas, top: top, rows: rows)
        case .help:
            acted = nil
            HelpView.render(state, context, into: &canvas, top: top, rows: rows)
        }
        FooterBar.render(state, selected: acted, context, into: &canvas)
    }
}
