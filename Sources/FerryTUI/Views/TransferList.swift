import FerryCore
import Foundation

/// The queue, one row per item: direction, state, id, name, bar, percent, done/total, rate, ETA or state word (a
/// failure's reason in a few words).
/// Only the rows on screen are formatted, so a 10,000-item queue costs what a screenful does.
enum TransferList {
    struct Columns: Equatable {
        var name: Int
        var bar: Int  // 0: no bar
        var percent: Int
        var status: Int
        var rate: Int
        var size: Int
    }

    /// The row at the top of the list for a selection at `selected` with `rows` rows, `previous` at the top
    /// before: the list scrolls only as far as keeps the selection on screen (as htop's and less's do; worked
    /// out from the selection alone, the selection stayed on the bottom row once past the first screen, and
    /// `k` after `G` scrolled the list under it).
    static func firstRow(selected: Int, rows: Int, count: Int, previous: Int = 0) -> Int {
        guard rows > 0, count > rows else { return 0 }
        var first = previous
        if selected < first { first = selected }
        if selected >= first + rows { first = selected - rows + 1 }
        return min(max(0, first), count - rows)
    }

    /// Whether every row the list shows at `first` is held (a window the engine sends may be on its way).
    static func rowsHeld(_ items: ListRows, first: Int, rows: Int) -> Bool {
        (first..<min(items.total, first + rows)).allSatisfy { items[$0] != nil }
    }

    static func render(_ state: AppState, _ snapshot: QueueSnapshot, _ items: ListRows, _ context: RenderContext,
                       into canvas: inout Canvas, top: Int, rows: Int) {
        guard rows > 0, canvas.width > 0 else { return }
        guard items.total > 0 else {
            if items.pending { return }  // the view's rows come in a moment
            let empty = snapshot.window == nil ? snapshot.items.isEmpty : snapshot.totals.count.values.reduce(0, +) == 0
            let text = empty
                ? "The queue is empty: a adds a download, u an upload, ? shows the keys."
                : state.filter.isEmpty ? "Nothing in this view (1 shows all)."
                : "Nothing in this view matches the filter (Esc clears it, 1 shows all)."
            canvas.put(context.ascii(DisplayWidth.truncate(text, to: canvas.width - 2, ellipsis: context.ellipsis)),
                       x: 1, y: top + min(1, rows - 1), style: Palette.dim)
            return
        }
        let selected = state.selectionIndex(in: items) ?? 0
        let first = state.firstRow(items)
        // Rows of a window still on its way are left blank for a frame.
        let shown = (first..<min(items.total, first + rows)).map { items[$0] }

        struct Row { var item: TransferSnapshot; var id, name, percent, size, rate, status: String }
        // Items of the same name (index.html from two hosts) are told apart by where they come from.
        var named: [String: Int] = [:]
        for item in shown.compactMap({ $0 }) { named[RowText.name(item), default: 0] += 1 }
        // Ids take the width of the widest held (a window of three screenfuls, so it changes only at a power of
        // ten), at least that of #999: a shell verb can be typed from the row.
        let idWidth = max(4, items.items.map { DisplayWidth.of($0.id.description) }.max() ?? 0)
        let columns = layout(width: canvas.width - idWidth - 1)
        let texts = shown.map { item -> Row? in
            guard let item else { return nil }
            let name = named[RowText.name(item), default: 0] > 1 ? "\(RowText.name(item)) (\(RowText.origin(item)))" : RowText.name(item)
            return
                Row(item: item, id: item.id.description, name: context.outside(name), percent: RowText.percent(item),
                    size: RowText.size(item, width: columns.size), rate: RowText.rate(item), status: context.outside(RowText.status(item, now: context.now)))
        }

        for (offset, row) in texts.enumerated() {
            let y = top + offset
            guard let row else { continue }
            let item = row.item
            let stateStyle = Palette.state(item.state)
            let isMarked = state.marks.contains(item)
            var x = canvas.put(context.directionGlyph(item.spec.direction), x: 0, y: y)
            x = canvas.put(isMarked ? "*" : " ", x: x, y: y, style: Palette.marked)
            x = canvas.put(context.stateGlyph(item.state), x: x, y: y, style: stateStyle)
            x = canvas.put(" ", x: x, y: y)
            x = canvas.put(DisplayWidth.pad(row.id, to: idWidth, alignRight: true, ellipsis: context.ellipsis), x: x, y: y, style: Palette.dim)
            x = canvas.put(" ", x: x, y: y)
            x = canvas.put(DisplayWidth.pad(row.name, to: columns.name, ellipsis: context.ellipsis), x: x, y: y, style: isMarked ? Palette.marked : .plain)
            if columns.bar > 0 {
                // Unknown size: an indeterminate bar while running, an empty one otherwise. A failed or cancelled
                // upload keeps nothing (a retry sends it all again): an empty bar, not the full one of its bytes sent.
                let progress: Float? = item.state == .completed ? 1 : RowText.keepsNothing(item) ? 0
                    : item.progress ?? (item.state == .running ? nil : 0)
                let bar = ProgressBar.text(progress: progress, width: columns.bar, unicode: context.unicode, phase: item.bytesDone)
                x = canvas.put(" ", x: x, y: y)
                x = canvas.put(bar, x: x, y: y, style: stateStyle.with { $0.bold = false })
            }
            let cells: [(String, Int, Style, Bool)] = [(row.percent, columns.percent, .plain, true), (row.size, columns.size, .plain, true),
                                                       (row.rate, columns.rate, .plain, true), (row.status, columns.status, stateStyle, false)]
            for (text, width, style, alignRight) in cells where width > 0 {
                x = canvas.put(" ", x: x, y: y)
                x = canvas.put(DisplayWidth.pad(text, to: width, alignRight: alignRight, ellipsis: context.ellipsis),
                               x: x, y: y, style: style)
            }
            if first + offset == selected {
                canvas.restyle(x: 0, y: y, count: canvas.width) { $0.reverse = true }
            }
        }
    }

    /// The widths of the columns, from the terminal's width alone (never from the rows shown, so they hold still
    /// while items pause, finish or leave): the name (at least 8) and the percent first, then the bar, the ETA
    /// or state word (or why it failed), the name up to 14, the rate and the sizes, each only if it fits; what
    /// is left goes to the name (up to two fifths of the row) and the bar (up to 50), the rest to the name. From
    /// 110 columns the state word and the sizes are wider (22 and 21). Texts wider than their column are cut.
    static func layout(width: Int) -> Columns {
        let percent = 4, status = 15, rate = 11, size = 15, wideStatus = 22, wideSize = 21
        var left = width - 4  // direction, mark, state glyph and a space
        let minName = 8
        var columns = Columns(name: 0, bar: 0, percent: 0, status: 0, rate: 0, size: 0)
        left -= minName
        func take(_ cost: Int) -> Bool {
            guard left >= cost else { return false }
            left -= cost
            return true
        }
        if take(percent + 1) { columns.percent = percent }
        if take(6 + 1) { columns.bar = 6 }
        if take(status + 1) {
            columns.status = status
        } else if left >= 7 {
            // Narrow: what is left, the longer words cut (a state word or a reason beats an empty column).
            columns.status = left - 1
            left = 0
        }
        // A name to tell the items apart comes before their rates and sizes.
        let readable = max(0, min(left, 14 - minName))
        left -= readable
        if take(rate + 1) { columns.rate = rate }
        if take(size + 1) { columns.size = size }
        left = max(0, left)
        var nameCap = max(16, width * 2 / 5)
        // A wide row has room for a reason with its countdown ("connection lost, in 8s", "no such host, in 12s")
        // and for sizes in two units ("293.0 KiB/1.0 MiB"), which 15 columns cut; the name gives it up.
        let widening = wideStatus - status + wideSize - size
        if width >= 110, left >= widening + 20 {
            left -= widening
            nameCap -= widening
            columns.status = wideStatus
            columns.size = wideSize
        }
        let nameExtra = readable + min(left, max(0, nameCap - minName - readable))
        left -= nameExtra - readable
        if columns.bar > 0 {
            let barExtra = min(44, left)
            left -= barExtra
            columns.bar += barExtra
        }
        columns.name = max(0, minName + nameExtra + left + min(0, width - 4 - minName))
        return columns
    }
}
