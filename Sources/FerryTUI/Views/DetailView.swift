import FerryCore
import Foundation

/// One item in full: URL (credentials redacted), destination or source, status and key headers, validators,
/// attempts with their errors and times, the start of an upload's response body, and the last minute's rate.
enum DetailView {
    typealias Line = (text: String, style: Style)

    static func lines(_ item: TransferSnapshot, width: Int, _ context: RenderContext) -> [Line] {
        var out: [Line] = []
        let labelWidth = 13
        let valueWidth = max(8, width - labelWidth - 2)
        func field(_ label: String, _ value: String, style: Style = .plain) {
            // Long values (URLs, paths) wrap rather than lose their end.
            let chunks = wrap(value, width: valueWidth)
            for (index, chunk) in chunks.enumerated() {
                out.append(((index == 0 ? DisplayWidth.pad(label, to: labelWidth) : String(repeating: " ", count: labelWidth)) + chunk, style))
            }
        }
        let direction = item.spec.direction == .download ? "download" : "upload"
        // The state in words: a running item's bare ETA ("13s") did not say what the seconds were.
        let status = item.state == .running
            ? "running" + (item.eta.map { ", ETA \(ByteFormat.duration($0))" } ?? "")
            : context.outside(RowText.status(item, now: context.now))
        out.append(("\(item.id) \(context.directionGlyph(item.spec.direction)) \(direction) \(context.stateGlyph(item.state)) \(status)",
                    Palette.state(item.state).with { $0.bold = true }))
        field("Name", context.outside(item.displayName))
        field("URL", context.ascii(TerminalSafe.redactedURL(item.spec.url)))
        if let upload = item.spec.upload {
            if let source = upload.primarySource, case let .file(path) = source {
                field("Source", context.outside(path))
            } else {
                field("Source", "standard input")
            }
            field("Method", context.outside(upload.methodText))
            if let resumable = item.resumable {
                // The protocol, where the server keeps the upload (no credentials), what it confirmed, each
                // resumption with the offset it went on from, and why it last started over.
                field("Resumable", resumable.kind.title)
                field("Location", resumable.displayLocation.map(context.outside) ?? "none yet (the server has not made one)")
                if resumable.location != nil { field("Confirmed", ByteFormat.bytes(resumable.confirmedOffset) + " on the server") }
                for resumption in resumable.resumptions.suffix(5) {
                    field("Resumed", "at \(ByteFormat.bytes(resumption.offset)), \(ago(resumption.at, context.now))")
                }
                if let reason = resumable.restartReason { field("Started over", context.outside(reason)) }
            } else if upload.resumable == .ietf {
                field("Resumable", "offered (IETF draft); the server has not taken it")
            }
        } else {
            if let name = item.savedPath ?? item.fileName.map({ (item.spec.directory as NSString).appendingPathComponent($0) })
                ?? item.spec.fileName.map({ (item.spec.directory as NSString).appendingPathComponent($0) }) {
                field(item.savedPath == nil ? "Destination" : "Saved to", context.outside(name))
            } else {
                // No name yet: the directory, and why.
                let why = item.state == .failed || item.state == .cancelled ? "no file was made" : "the name comes with the server's answer"
                field("Destination", context.outside(item.spec.directory.hasSuffix("/") ? item.spec.directory : item.spec.directory + "/") + " (\(why))")
            }
        }
        var progress = "\(ByteFormat.bytes(item.bytesDone))"
        if let total = item.bytesExpected {
            // A failed upload's share shows nothing (the server keeps none of it): said, not "()".
            let percent = RowText.percent(item)
            progress += " of \(ByteFormat.bytes(total))"
                + (!percent.isEmpty ? " (\(percent))" : RowText.keepsNothing(item) ? " (a retry sends it all again)" : "")
        }
        if let rate = item.bytesPerSecond, item.state == .running { progress += "  \(ByteFormat.rate(rate))" }
        if let eta = item.eta, item.state == .running { progress += "  ETA \(ByteFormat.duration(eta))" }
        field("Progress", progress)
        // A segmented download: each range, where it lies in the file and how far it is.
        if let segments = item.segments, segments.count > 1 {
            let done = segments.filter(\.isComplete).count
            field("Ranges", "\(segments.count), \(done) done")
            let barWidth = max(4, min(20, valueWidth - 40))
            for (index, segment) in segments.enumerated() {
                let length = max(1, segment.end - segment.start)
                let fraction = Float(min(segment.done, length)) / Float(length)
                let place = "\(ByteFormat.bytes(segment.start))-\(ByteFormat.bytes(segment.end))"
                let line = DisplayWidth.pad("\(index + 1)", to: 3) + ProgressBar.text(progress: fraction, width: barWidth, unicode: context.unicode)
                    + DisplayWidth.pad(" \(min(100, Int(fraction * 100)))%", to: 6) + " " + place
                field("", line)
            }
        }
        if let limit = item.rateLimit { field("Limit", RateText.describe(limit)) }
        // The status once: an error that says it already ("HTTP 404 Not Found") stands alone.
        let scheme = TransferScheme(item.spec.url)
        if let status = item.lastStatus, item.failure?.status != status, scheme?.isHTTP != false {
            field("Status", "HTTP \(status)")
        }
        if let error = item.lastError { field("Error", context.outside(error), style: Palette.error) }
        if item.retries > 0 || item.state == .waiting {
            var retries = item.retries <= item.maxRetries ? "\(item.retries) of \(item.maxRetries)" : item.retryCount
            if let next = item.nextRetryAt, item.state == .waiting {
                retries += ", next in \(ByteFormat.duration(max(0, next.timeIntervalSince(context.now)).rounded(.up)))"
            }
            field("Retries", retries)
        }
        let v = item.validators
        if let scheme, !scheme.isHTTP {
            // A remote file's size and time are what a resume checks (FileWire: no headers to show).
            field("Protocol", scheme.protocolName)
            // The key the server was trusted by (known_hosts), as ssh shows it.
            if let key = item.attempts.last(where: { $0.hostKey != nil })?.hostKey { field("Host key", context.outside(key)) }
            var remote: [String] = []
            if let length = v.totalLength { remote.append(ByteFormat.bytes(length)) }
            if let modified = v.lastModified { remote.append("modified \(context.outside(modified))") }
            if !remote.isEmpty { field("Remote file", remote.joined(separator: ", ")) }
        } else {
            var validators: [String] = []
            if let etag = v.etag { validators.append("ETag \(context.outside(etag))") }
            if let modified = v.lastModified { validators.append("Last-Modified \(context.outside(modified))") }
            if let length = v.totalLength { validators.append("length \(length)") }
            if !validators.isEmpty { field("Validators", validators.joined(separator: "  ")) }
        }
        for header in item.spec.headers {
            field("Sent header", context.outside("\(header.name): \(header.value)"))
        }
        if let response = item.response {
            field("Response", "HTTP \(response.status), \(ByteFormat.bytes(response.bodyLength))\(response.truncated ? " (first \(ByteFormat.bytes(Int64(response.body.count))) kept)" : "")")
            let keyHeaders = ["content-type", "location", "etag", "server", "retry-after"]
            for header in response.headers where keyHeaders.contains(header.name.lowercased()) {
                field("", context.outside("\(header.name): \(header.value)"))
            }
        }
        if !item.attempts.isEmpty {
            out.append(("", .plain))
            out.append(("Attempts", Palette.label))
            for attempt in item.attempts.suffix(10) {
                var line = "  \(attempt.number). \(ago(attempt.startedAt, context.now))"
                if let end = attempt.endedAt { line += ", took \(ByteFormat.duration(end.timeIntervalSince(attempt.startedAt)))" }
                if attempt.fromOffset > 0 { line += ", from \(ByteFormat.bytes(attempt.fromOffset))" }
                if let words = attempt.restartWords(over: scheme) { line += ", \(words)" }
                if let status = attempt.status, scheme?.isHTTP != false, attempt.error?.hasPrefix("HTTP \(status)") != true { line += ", HTTP \(status)" }
                if let error = attempt.error { line += ": " + context.outside(error) }
                out.append((DisplayWidth.truncate(line, to: width - 1, ellipsis: context.ellipsis), attempt.error == nil ? .plain : Palette.error))
            }
        }
        if let response = item.response, !response.body.isEmpty {
            out.append(("", .plain))
            out.append(("Response body", Palette.label))
            let text = context.ascii(TerminalSafe.sanitize(bytes: response.body.prefix(4096), allowNewlines: true))
            for line in text.split(separator: "\n", omittingEmptySubsequences: false).prefix(8) {
                out.append(("  " + DisplayWidth.truncate(String(line), to: width - 3, ellipsis: context.ellipsis), .plain))
            }
        }
        out.append(("", .plain))
        let peak = item.rateHistory.max() ?? 0
        out.append(("Rate, last minute" + (peak > 0 ? " (peak \(ByteFormat.rate(peak)))" : ""), Palette.label))
        let graphWidth = min(60, max(1, width - 3))
        out.append(("  " + sparkline(item.rateHistory.suffix(graphWidth), unicode: context.unicode), Palette.state(.running)))
        return out
    }

    static func render(_ item: TransferSnapshot?, scroll: Int, _ context: RenderContext, into canvas: inout Canvas, top: Int, rows: Int) {
        guard rows > 0 else { return }
        guard let item else {
            canvas.put("This item is no longer in the queue (Esc goes back).", x: 1, y: top, style: Palette.dim)
            return
        }
        let all = lines(item, width: canvas.width - 1, context)
        let first = min(scroll, max(0, all.count - rows))
        for (row, line) in all.dropFirst(first).prefix(rows).enumerated() {
            canvas.put(line.text, x: 1, y: top + row, style: line.style, maxWidth: canvas.width - 1)
        }
    }

    static func sparkline<S: Collection>(_ values: S, unicode: Bool) -> String where S.Element == Double {
        guard !values.isEmpty else { return unicode ? "(no samples yet)" : "(no samples yet)" }
        let levels: [Character] = unicode ? ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"] : ["_", ".", ":", "-", "=", "+", "*", "#"]
        let peak = values.max() ?? 0
        return String(values.map { value in
            guard peak > 0, value > 0 else { return levels[0] }
            return levels[min(levels.count - 1, Int((value / peak * Double(levels.count - 1)).rounded()))]
        })
    }

    static func ago(_ date: Date, _ now: Date) -> String {
        let seconds = now.timeIntervalSince(date)
        return seconds < 1 ? "just now" : "\(ByteFormat.duration(seconds)) ago"
    }

    /// Lines of at most `width` cells, broken after a blank or a URL's or path's separator when one is in the
    /// line's last third (not in the middle of a word), else where the width ends.
    static func wrap(_ text: String, width: Int) -> [String] {
        guard width > 0, DisplayWidth.of(text) > width else { return [text] }
        let breaks: Set<Character> = [" ", "/", "?", "&", "=", "-", "_", ".", ","]
        var lines: [String] = []
        var current: [Character] = []
        var used = 0
        for c in text {
            let w = DisplayWidth.of(c)
            if used + w > width {
                var cut = current.count
                if let last = current.lastIndex(where: { breaks.contains($0) }), last + 1 >= current.count * 2 / 3, last + 1 < current.count {
                    cut = last + 1
                }
                lines.append(String(current[..<cut]).trimmingCharacters(in: .init(charactersIn: " ")))
                current = Array(current[cut...])
                used = current.reduce(0) { $0 + DisplayWidth.of($1) }
            }
            current.append(c)
            used += w
        }
        if !current.isEmpty { lines.append(String(current)) }
        return lines
    }
}
