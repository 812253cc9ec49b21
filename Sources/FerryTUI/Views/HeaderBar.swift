import FerryCore

/// The top row: total down/up rates, counts by state, the view, the filter, the concurrency.
enum HeaderBar {
    static func render(_ state: AppState, _ snapshot: QueueSnapshot, _ context: RenderContext, into canvas: inout Canvas) {
        guard canvas.height > 0 else { return }
        canvas.fill(x: 0, y: 0, count: canvas.width, style: Palette.header)
        let totals = snapshot.totals
        var left = " ferry  \(context.directionGlyph(.download)) \(ByteFormat.rate(totals.downloadBytesPerSecond))"
            + "  \(context.directionGlyph(.upload)) \(ByteFormat.rate(totals.uploadBytesPerSecond))  "
        let words: [(TransferState, String)] = [(.running, "running"), (.waiting, "retrying"), (.queued, "queued"),
                                                (.paused, "paused"), (.completed, "done"), (.failed, "failed"), (.cancelled, "cancelled")]
        let counts = words.compactMap { state, word in totals.count[state].flatMap { $0 > 0 ? "\($0) \(word)" : nil } }
        left += counts.isEmpty ? "empty" : counts.joined(separator: ", ")
        var right = ""
        if state.view != .all { right += "[\(state.view.title)] " }
        if !state.filter.isEmpty { right += "/" + context.outside(state.filter) + " " }
        if snapshot.downloadLimit != nil || snapshot.uploadLimit != nil {
            right += "limit \(context.directionGlyph(.download))\(RateText.typed(snapshot.downloadLimit))"
                + " \(context.directionGlyph(.upload))\(RateText.typed(snapshot.uploadLimit))  "
        }
        right += "\(snapshot.maxConcurrent) at once "
        left = context.ascii(left)
        let rightWidth = DisplayWidth.of(right)
        if DisplayWidth.of(left) + 2 + rightWidth <= canvas.width {
            canvas.put(left, x: 0, y: 0, style: Palette.header)
            canvas.put(right, x: canvas.width - rightWidth, y: 0, style: Palette.header)
        } else {
            canvas.put(DisplayWidth.truncate(left, to: canvas.width, ellipsis: context.ellipsis), x: 0, y: 0, style: Palette.header)
        }
    }
}
