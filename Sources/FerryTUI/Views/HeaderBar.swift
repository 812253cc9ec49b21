import FerryCore

/// The top row: total down/up rates, counts by state, the selection's place, the view, the marks, the filter,
/// the concurrency. When the row is crowded, what says which rows are shown (the place, the view, the marks, the filter) never
/// goes: the counts shorten first (to their glyphs), then the limits and the concurrency go, then the rates
/// are cut.
enum HeaderBar {
    /// `listed`: the list's rows (nil off the list).
    static func render(_ state: AppState, _ snapshot: QueueSnapshot, _ listed: ListRows?, _ context: RenderContext, into canvas: inout Canvas) {
        guard canvas.height > 0 else { return }
        canvas.fill(x: 0, y: 0, count: canvas.width, style: Palette.header)
        let totals = snapshot.totals
        let rates = " ferry  \(context.directionGlyph(.download)) \(ByteFormat.rate(totals.downloadBytesPerSecond))"
            + "  \(context.directionGlyph(.upload)) \(ByteFormat.rate(totals.uploadBytesPerSecond))  "
        let order: [TransferState] = [.running, .waiting, .queued, .paused, .completed, .failed, .cancelled]
        let present = order.compactMap { state in totals.count[state].flatMap { $0 > 0 ? (state, state.label, $0) : nil } }
        // The running items that are finishing (their files being synced) hold no connection: said apart, so that
        // the running are never more than "N at once".
        let finishing = min(totals.finishing ?? 0, totals.count[.running] ?? 0)
        let counts = present.isEmpty ? "empty" : present.map { state, label, count in
            guard state == .running, finishing > 0 else { return "\(count) \(label)" }
            return (count > finishing ? "\(count - finishing) \(label), " : "") + "\(finishing) finishing"
        }.joined(separator: ", ")
        let glyphs = present.isEmpty ? "empty" : present.map { state, _, count in
            guard state == .running, finishing > 0 else { return "\(context.stateGlyph(state))\(count)" }
            return "\(context.stateGlyph(state))\(count - finishing)+\(finishing)"
        }.joined(separator: " ")

        // What says which rows are shown, and where the selection is among them (`512/2041`): never cut (the
        // filter, typed by the user, is made safe and kept short).
        var shown = ""
        if let listed, let index = state.selectionIndex(in: listed) {
            // As wide at the first row as at the last: the header's layout does not change as the selection moves.
            let place = "\(index + 1)/\(listed.total)"
            shown += String(repeating: " ", count: max(0, 2 * "\(listed.total)".count + 1 - place.count)) + place + " "
        }
        if let tree = state.openTree { shown += "in \(DisplayWidth.truncate(context.outside(tree.name), to: max(8, canvas.width / 4), ellipsis: context.ellipsis)) " }
        if state.view != .all { shown += "[\(state.view.title)] " }
        if state.sort != .queue { shown += "sort:\(state.sort.rawValue) " }
        if !state.marks.isEmpty { shown += "\(state.marks.count) marked " }
        if !state.filter.isEmpty {
            shown += "/" + DisplayWidth.truncate(context.outside(state.filter), to: max(4, canvas.width / 3), ellipsis: context.ellipsis) + " "
        }
        var settings = ""
        if snapshot.downloadLimit != nil || snapshot.uploadLimit != nil {
            settings += "limit \(context.directionGlyph(.download))\(RateText.typed(snapshot.downloadLimit))"
                + " \(context.directionGlyph(.upload))\(RateText.typed(snapshot.uploadLimit))  "
        }
        settings += "\(snapshot.maxConcurrent) at once "

        // The last 20 seconds' total rate as a small graph (htop's meters) while something moves, the first thing
        // to go when crowded (with nothing moving it showed the last bars for ever).
        let recent = state.rateHistory.suffix(20)
        let graph = (totals.count[.running] ?? 0) > 0 && recent.contains { $0 > 0 }
            ? DetailView.sparkline(recent, unicode: context.unicode) + "  " : ""
        let candidates = [(rates + graph + counts, shown + settings), (rates + counts, shown + settings),
                          (rates + graph + glyphs, shown + settings), (rates + glyphs, shown + settings), (rates + glyphs, shown)]
        for (left, right) in candidates.map({ (context.ascii($0.0), $0.1) })
        where DisplayWidth.of(left) + 2 + DisplayWidth.of(right) <= canvas.width {
            canvas.put(left, x: 0, y: 0, style: Palette.header)
            canvas.put(right, x: canvas.width - DisplayWidth.of(right), y: 0, style: Palette.header)
            return
        }
        // Still too wide: the left is cut, what is shown stays whole at the right.
        let right = DisplayWidth.truncate(shown, to: canvas.width, ellipsis: context.ellipsis)
        let room = canvas.width - DisplayWidth.of(right) - (right.isEmpty ? 0 : 1)
        if room > 0 {
            canvas.put(DisplayWidth.truncate(context.ascii(rates + glyphs), to: room, ellipsis: context.ellipsis), x: 0, y: 0, style: Palette.header)
        }
        canvas.put(right, x: canvas.width - DisplayWidth.of(right), y: 0, style: Palette.header)
    }
}
