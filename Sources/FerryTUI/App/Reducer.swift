import FerryCore
import Foundation

/// The whole behaviour of the UI as one pure function: a key and the current snapshot in, the next state and the
/// engine commands out. No engine, no terminal: tests call it directly.
public func reduce(_ state: AppState, _ key: Key, _ snapshot: QueueSnapshot, keymap: Keymap = .standard) -> (AppState, [Command]) {
    var state = state
    state.message = nil
    state.openWhenHeld = false
    // A paste is text, never keys: it cannot answer a question, and outside a prompt it opens the add prompt
    // with what was pasted (URLs, most likely) for Enter to add, rather than run as commands.
    if case let .paste(text) = key, state.prompt == nil {
        guard state.confirmation == nil, state.screen == .list else { return (state, []) }
        let pasted = LineEditor.text(pasted: withoutCommentLines(text))
        state.prompt = .init(kind: .downloadURL, editor: LineEditor(pasted.trimmingCharacters(in: .whitespaces)))
        return (state, [])
    }
    if state.confirmation != nil { return confirm(state, key) }
    // URLs pasted as a list may bring its comments: a line that starts with `#` is no URL (as in an `-i` file).
    if case let .paste(text) = key, state.prompt?.kind == .downloadURL {
        return editPrompt(state, .paste(withoutCommentLines(text)), snapshot)
    }
    if state.prompt != nil { return editPrompt(state, key, snapshot) }
    switch state.screen {
    case .help:
        switch key {
        case .up, .character("k"): state.helpScroll = max(0, state.helpScroll - 1)
        case .down, .character("j"): state.helpScroll += 1
        case .escape, .enter, .character("q"), .character("?"): state.screen = .list; state.helpScroll = 0
        default: break
        }
        return (state, [])
    case .detail:
        switch key {
        case .up, .character("k"): state.detailScroll = max(0, state.detailScroll - 1); return (state, [])
        case .down, .character("j"): state.detailScroll += 1; return (state, [])
        case .pageUp: state.detailScroll = max(0, state.detailScroll - state.listHeight); return (state, [])
        case .pageDown: state.detailScroll += state.listHeight; return (state, [])
        default: break
        }
    case .list:
        break
    }
    guard let action = keymap.action(for: key) else { return (state, []) }
    return perform(action, state, snapshot)
}

private func perform(_ action: Action, _ stateIn: AppState, _ snapshot: QueueSnapshot) -> (AppState, [Command]) {
    var state = stateIn
    let items = state.rows(snapshot)
    let index = state.selectionIndex(in: items)
    let selected = state.selectedItem(snapshot)
    let inList = state.screen == .list
    // While items are marked, the list's actions act on them (the detail view's on its item).
    let onMarks = inList && !state.marks.isEmpty
    let markedCount = state.marks.count
    let marked = "\(markedCount) marked"
    // The selected row is a whole tree (TreeRow): what acts on a row acts on its batch.
    let tree = inList && !onMarks ? selected?.tree : nil
    let treeName = tree.map { TerminalSafe.sanitize($0.name) } ?? ""
    let wholeTree = Selection(batch: tree?.batch)

    func note(_ text: String, error: Bool = false) { state.message = .init(text: text, isError: error) }
    func name(_ item: TransferSnapshot) -> String { TerminalSafe.sanitize(item.displayName) }

    switch action {
    case .selectUp where inList: state.select(index: (index ?? 0) - 1, in: items)
    case .selectDown where inList: state.select(index: (index ?? -1) + 1, in: items)
    case .pageUp where inList: state.select(index: (index ?? 0) - state.listHeight, in: items)
    case .pageDown where inList: state.select(index: (index ?? 0) + state.listHeight, in: items)
    case .selectFirst where inList: state.select(index: 0, in: items)
    case .selectLast where inList: state.select(index: items.pending ? Int.max / 2 : items.total - 1, in: items)
    case .selectUp, .selectDown, .pageUp, .pageDown, .selectFirst, .selectLast: break

    case .openDetail:
        guard inList else { break }
        guard let selected else {
            // The selected row's window is on its way (G on a long queue, then Enter at once): open it then.
            if index != nil { state.openWhenHeld = true }
            break
        }
        state.open(selected)
    case .back:
        if !inList {
            state.screen = .list
        } else if !state.marks.isEmpty {
            state.marks.clear()
            note("marks cleared")
        } else if !state.filter.isEmpty {
            state.filter = ""
            note("filter cleared")
        } else if let open = state.openTree {
            // Back to the tree's row (the engine says where it is now: the view's `around`).
            state.openTree = nil
            state.selectedID = open.row
        }

    case .togglePause where onMarks:
        // Marked items pause, unless every marked one in sight is paused: then they resume.
        let seen = items.items.filter(state.marks.contains)
        if !seen.isEmpty, seen.allSatisfy({ $0.state == .paused }) {
            note("resuming \(marked)")
            return (state, [.queueSaying(.resume(state.marks.selection))])
        }
        note("pausing \(marked)")
        return (state, [.queueSaying(.pause(state.marks.selection))])
    case .cancel where onMarks:
        note("cancelling \(marked)")
        return (state, [.queueSaying(.cancel(state.marks.selection))])
    case .retry where onMarks:
        note("retrying \(marked)")
        return (state, [.queueSaying(.retry(state.marks.selection))])
    case .remove where onMarks, .removeDeletingPartial where onMarks:
        state.confirmation = .removeMarked(state.marks.selection, count: markedCount, deletePartial: action == .removeDeletingPartial)
    case .moveItemDown where onMarks, .moveItemUp where onMarks:
        return (state, [.queue(.move(state.marks.selection, action == .moveItemDown ? .down : .up))])

    case .togglePause where tree != nil:
        guard let tree else { break }
        if tree.applies(.pause) { note("pausing \(treeName)"); return (state, [.queueSaying(.pause(wholeTree))]) }
        if tree.applies(.resume) { note("resuming \(treeName)"); return (state, [.queueSaying(.resume(wholeTree))]) }
        note(tree.applies(.retry) ? "\(treeName) is \(tree.state.word): r retries what failed" : "\(treeName) is \(tree.state.word)")
    case .cancel where tree != nil:
        guard let tree else { break }
        guard tree.applies(.cancel) else { note("\(treeName) has nothing left to cancel"); break }
        note("cancelling \(treeName)")
        return (state, [.queueSaying(.cancel(wholeTree))])
    case .retry where tree != nil:
        guard let tree else { break }
        guard tree.applies(.retry) else { note("nothing of \(treeName) failed or was cancelled"); break }
        note("retrying what failed of \(treeName)")
        return (state, [.queueSaying(.retry(wholeTree))])
    case .remove where tree != nil, .removeDeletingPartial where tree != nil:
        guard let tree else { break }
        state.confirmation = .removeTree(wholeTree, name: DisplayWidth.truncate(treeName, to: 40), count: tree.count,
                                         deletePartial: action == .removeDeletingPartial)
    case .moveItemDown where tree != nil, .moveItemUp where tree != nil:
        return (state, [.queue(.move(wholeTree, action == .moveItemDown ? .down : .up))])
    case .limitItem where tree != nil:
        guard let tree else { break }
        state.prompt = .init(kind: .treeLimit(batch: tree.batch, name: DisplayWidth.truncate(treeName, to: 30)),
                             editor: LineEditor(RateText.typed(tree.rateLimit), selected: true))
    case .mark where tree != nil:
        note("a tree's row acts on all its files: Enter opens it to mark some")

    case .mark:
        guard inList, let item = selected else { note("nothing selected"); break }
        guard state.marks.toggle(item) else { note("the marks are of another view: M clears them"); break }
        state.select(index: (index ?? -1) + 1, in: items)
    case .markAll:
        guard inList else { break }
        if !state.marks.isEmpty { state.marks.clear(); note("marks cleared"); break }
        guard !items.pending, items.total > 0 else { note("nothing to mark in this view"); break }
        // What is there now: the engine's highest id (a window holds part of the queue), else the items held.
        let upTo = snapshot.totals.lastID ?? (snapshot.window == nil ? snapshot.items.map(\.id.rawValue).max() : nil)
        state.marks.markAll(of: state.queueView, total: items.total, upTo: upTo)
        note("marked all \(items.total) of this view: p c r d J K act on them, Esc clears")
    case .retryFailed:
        guard inList, let failed = state.viewSelection(in: [.failed]) else { note("this view shows no failed items"); break }
        note("retrying the failed items of this view")
        return (state, [.queueSaying(.retry(failed))])
    case .clearFinished:
        guard inList, let done = state.viewSelection(in: [.completed]) else { note("this view shows no finished items"); break }
        // The count is the queue's when the view is every item; a filter's share of it is the engine's to find.
        let count = done.filter == nil ? snapshot.counts[.completed, default: 0] : nil
        guard count != 0 else { note("nothing finished in this view"); break }
        state.confirmation = .clearFinished(done, count: count)

    case .togglePause:
        guard let item = selected else { note("nothing selected"); break }
        if StateChange.pause.applies(to: item.state) { return (state, [.pause(item.id)]) }
        if StateChange.resume.applies(to: item.state) { return (state, [.resume(item.id)]) }
        if StateChange.retry.applies(to: item.state) { note("\(item.id) is \(item.state.rawValue): r retries it"); break }
        note("\(item.id) is \(item.state.word)")
    case .togglePauseAll:
        // The queue's counts: the list may hold only a window of it.
        let count = snapshot.counts
        let anyMoving = count.contains { $0.key.isPending && $0.value > 0 }
        if anyMoving { note("pausing everything"); return (state, [.pauseAll]) }
        if count[.paused, default: 0] > 0 { note("resuming everything"); return (state, [.resumeAll]) }
        note("nothing to pause or resume")
    case .cancel:
        guard let item = selected else { note("nothing selected"); break }
        guard StateChange.cancel.applies(to: item.state) else { note("\(item.id) is already \(item.state.word)"); break }
        note("cancelled \(item.id) \(name(item))")
        return (state, [.cancel(item.id)])
    case .retry:
        guard let item = selected else { note("nothing selected"); break }
        guard StateChange.retry.applies(to: item.state) else { note("only a failed or cancelled item can be retried"); break }
        note("retrying \(item.id) \(name(item))")
        return (state, [.retry(item.id)])
    case .remove, .removeDeletingPartial:
        guard let item = selected else { note("nothing selected"); break }
        state.confirmation = .remove(item.id, name: DisplayWidth.truncate(name(item), to: 40), deletePartial: action == .removeDeletingPartial)

    case .moveItemDown, .moveItemUp:
        guard inList, let item = selected else { break }
        return (state, [.move(item.id, action == .moveItemDown ? .down : .up)])

    case .addDownload: state.prompt = .init(kind: .downloadURL)
    case .addUpload: state.prompt = .init(kind: .uploadFile)
    case .filter:
        guard inList else { break }
        state.prompt = .init(kind: .filter(previous: state.filter), editor: LineEditor(state.filter))

    case .cycleSort:
        guard inList else { break }
        state.sort = state.sort.next
        // The selected item stays selected where it now is (found when the sorted rows come).
        note(state.sort == .queue ? "in queue order" : "sorted by \(state.sort.rawValue)")

    case let .showView(view):
        guard inList || view != state.view else { break }
        state.screen = .list
        state.view = view
        state.selectedIndex = 0
        state.selectedID = nil

    case .concurrencyUp, .concurrencyDown:
        // Presses add up: four quick +'s ask for four more, not "what the last frame showed, plus one" four times.
        let shown = snapshot.maxConcurrent
        let base = state.concurrencyAsked.flatMap { $0.shown == shown ? $0.asked : nil } ?? shown
        let next = ConcurrencyCaps(global: base).stepped(by: action == .concurrencyUp ? 1 : -1).global
        note("\(next) transfer\(next == 1 ? "" : "s") at once")
        guard next != base else { break }
        state.concurrencyAsked = .init(shown: shown, asked: next)
        return (state, [.setConcurrency(next)])

    case .limitItem:
        guard let item = selected else { note("nothing selected"); break }
        state.prompt = .init(kind: .itemLimit(item.id), editor: LineEditor(RateText.typed(item.rateLimit), selected: true))
    case .limitGlobal:
        state.prompt = .init(kind: .globalDownloadLimit, editor: LineEditor(RateText.typed(snapshot.downloadLimit), selected: true))

    case .help:
        state.screen = .help
        state.helpScroll = 0
    case .quit:
        return (state, [.quit])
    case .stopEngine:
        let count = snapshot.counts
        let running = count[.running, default: 0] + count[.waiting, default: 0]
        state.confirmation = .stopEngine(running: running)
    }
    return (state, [])
}

private func confirm(_ stateIn: AppState, _ key: Key) -> (AppState, [Command]) {
    var state = stateIn
    guard let question = state.confirmation else { return (state, []) }
    switch key {
    case .character("y"), .character("Y"):
        state.confirmation = nil
        switch question {
        case let .remove(id, name, deletePartial):
            state.message = .init(text: "removed \(id) \(name)", isError: false)
            if case .detail(id) = state.screen { state.screen = .list }
            return (state, [.remove(id, deletePartial: deletePartial)])
        case let .removeTree(selection, name, _, deletePartial):
            // The engine's answer says how many went.
            state.message = .init(text: "removing \(name)", isError: false)
            return (state, [.queueSaying(.remove(selection, deletePart: deletePartial))])
        case let .removeMarked(selection, count, deletePartial):
            state.message = .init(text: "removed \(count) marked", isError: false)
            state.marks.clear()
            return (state, [.queue(.remove(selection, deletePart: deletePartial))])
        case let .clearFinished(selection, _):
            // The engine's answer replaces this with what it removed, counted (`removed 12 (#3-#14)`).
            state.message = .init(text: "clearing the finished items (their files stay)", isError: false)
            return (state, [.queueSaying(.remove(selection, deletePart: false))])
        case .stopEngine:
            return (state, [.stopEngine])
        }
    case .character("n"), .character("N"), .escape, .character("q"):
        state.confirmation = nil
    default:
        state.confirmation = question  // anything else: keep asking
    }
    return (state, [])
}

/// Pasted text without its comment lines (InputValidation.isComment, as in an `-i` file).
private func withoutCommentLines(_ text: String) -> String {
    text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        .filter { !InputValidation.isComment($0) }
        .joined(separator: "\n")
}

private func editPrompt(_ stateIn: AppState, _ key: Key, _ snapshot: QueueSnapshot) -> (AppState, [Command]) {
    var state = stateIn
    guard var prompt = state.prompt else { return (state, []) }
    switch key {
    case .escape:
        if case let .filter(previous) = prompt.kind { state.filter = previous }
        // The folder prompt goes back to the URL typed before it; any other prompt is abandoned.
        if case let .downloadFolder(url) = prompt.kind {
            state.prompt = .init(kind: .downloadURL, editor: LineEditor(url))
        } else {
            state.prompt = nil
        }
        return (state, [])
    case .enter:
        return submit(state, prompt, snapshot)
    case .tab:
        prompt.error = nil
        prompt.hint = nil
        switch prompt.kind {
        case .downloadURL:
            prompt = .init(kind: .downloadFolder(url: prompt.editor.text), editor: LineEditor(state.downloadDirectory + "/"))
        case .downloadFolder, .uploadFile:
            // The entries on disk are read by whoever runs the app (FileEffects); their answer completes the text.
            state.prompt = prompt
            return (state, [.completePath(prompt.editor.text, directoriesOnly: prompt.kind != .uploadFile)])
        case let .uploadURL(path, shape):
            prompt.kind = .uploadURL(path: path, shape: shape.next)
        default:
            break
        }
        state.prompt = prompt
        return (state, [])
    default:
        guard prompt.editor.apply(key) else { return (state, []) }
        prompt.error = nil
        prompt.hint = nil
        state.prompt = prompt
        if case .filter = prompt.kind {
            state.filter = prompt.editor.text
            state.selectedIndex = 0
        }
        return (state, [])
    }
}

/// The answer to a question the reducer asked of the file system (FileEffects). One that comes after its prompt
/// moved on (closed, or its text edited since) changes nothing.
public func reduce(_ stateIn: AppState, answer: FileAnswer) -> AppState {
    var state = stateIn
    guard var prompt = state.prompt else { return state }
    let typed = prompt.editor.text.trimmingCharacters(in: .whitespaces)
    switch answer {
    case let .completed(text, found):
        guard prompt.editor.text == text, prompt.kind == .uploadFile || prompt.kind.isFolder else { return state }
        prompt.editor = LineEditor(found.text)
        prompt.hint = found.candidates.isEmpty ? nil
            : "\(found.candidates.count) matches: " + found.candidates.prefix(20).joined(separator: "  ")
    case let .folder(text, checked, url):
        guard prompt.kind == .downloadFolder(url: url), typed == text else { return state }
        switch checked {
        case let .path(directory):
            state.downloadDirectory = directory
            state.prompt = .init(kind: .downloadURL, editor: LineEditor(url))
            return state
        case let .refused(reason):
            prompt.error = reason
        }
    case let .uploadFile(text, checked):
        guard prompt.kind == .uploadFile, typed == text else { return state }
        switch checked {
        case let .path(path):
            state.prompt = .init(kind: .uploadURL(path: path, shape: .put))
            return state
        case let .refused(reason):
            prompt.error = reason
        }
    }
    state.prompt = prompt
    return state
}

private func submit(_ stateIn: AppState, _ promptIn: AppState.Prompt, _ snapshot: QueueSnapshot) -> (AppState, [Command]) {
    var state = stateIn
    var prompt = promptIn
    let text = prompt.editor.text.trimmingCharacters(in: .whitespaces)
    do {
        switch prompt.kind {
        case .filter:
            state.prompt = nil
            state.filter = text
            return (state, [])
        case .downloadURL:
            // Several URLs pasted at once (separated by blanks) are several downloads, one add; a bad one is named
            // and nothing is added.
            let words = text.split(whereSeparator: \.isWhitespace).map(String.init)
            var urls: [URL] = []
            for word in words {
                do throws(UsageError) {
                    urls.append(try InputValidation.url(word))
                } catch {
                    throw words.count == 1 ? error : UsageError("URL \(urls.count + 1) of \(words.count): \(error.description)")
                }
            }
            guard let first = urls.first else { throw UsageError("empty URL") }
            state.prompt = nil
            state.message = .init(text: urls.count == 1 ? "added \(TerminalSafe.redactedURL(first))"
                                                        : "added \(urls.count) downloads, the first \(TerminalSafe.redactedURL(first))",
                                  isError: false)
            return (state, [.add(urls.map { url in
                var spec = TransferSpec(download: url, directory: state.downloadDirectory)
                spec.netrcFile = state.netrcFile
                spec.takeAgent(state.sshAgent)
                return spec
            })])
        case let .downloadFolder(url):
            guard !text.isEmpty else { throw UsageError("no folder given") }
            // Made when missing, as -o makes it; a file or an unwritable folder is refused in words (the answer).
            return (state, [.checkFolder(text, url: url)])
        case .uploadFile:
            guard !text.isEmpty else { throw UsageError("no file given") }
            return (state, [.checkUploadFile(text)])
        case let .uploadURL(path, shape):
            let url = try InputValidation.url(text)
            // (The file is checked again as the add is carried out: it may have gone while the URL was typed.)
            // The same bodies as `ferry put` makes: raw with PUT or POST, or a form with the file as `file`.
            let (upload, destination) = try UploadSpec.to(url, .file(path: path), contentType: nil, form: shape == .form ? [] : nil,
                                                          method: shape == .post ? "POST" : nil)
            state.prompt = nil
            state.message = .init(text: "added upload (\(shape.title)) to \(TerminalSafe.redactedURL(destination))", isError: false)
            var spec = TransferSpec(upload: upload, to: destination)
            spec.netrcFile = state.netrcFile
            spec.takeAgent(state.sshAgent)
            return (state, [.add([spec])])
        case let .itemLimit(id):
            let rate = try RateText.parse(text)
            state.prompt = nil
            state.message = .init(text: rate == nil ? "\(id) no longer limited" : "\(id) limited to \(RateText.describe(rate))", isError: false)
            return (state, [.setItemLimit(id, rate)])
        case let .treeLimit(batch, name):
            let rate = try RateText.parse(text)
            state.prompt = nil
            state.message = .init(text: rate == nil ? "\(name) no longer limited" : "\(name) limited to \(RateText.describe(rate)), shared by its files",
                                  isError: false)
            // The tree's own limit: the message above says it (an answer listing its files would read as each one's).
            return (state, [.queue(.setRateLimit(Selection(batch: batch), rate))])
        case .globalDownloadLimit:
            let rate = try RateText.parse(text)
            state.prompt = .init(kind: .globalUploadLimit(download: rate), editor: LineEditor(RateText.typed(snapshot.uploadLimit), selected: true))
            return (state, [])
        case let .globalUploadLimit(download):
            let rate = try RateText.parse(text)
            state.prompt = nil
            state.message = .init(text: "limits: down \(RateText.describe(download)), up \(RateText.describe(rate))", isError: false)
            return (state, [.setGlobalLimits(download: download, upload: rate)])
        }
    } catch {
        prompt.error = TerminalSafe.sanitize(String(describing: error))
        state.prompt = prompt
        return (state, [])
    }
}
