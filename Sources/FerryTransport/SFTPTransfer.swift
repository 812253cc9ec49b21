import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request of a URLSession task to an sftp:// URL, carried over an SFTPConnection (OpenSSH's client) on the
/// transport's thread, as CurlTransfer carries the others on libcurl: the same answers in HTTP's terms
/// (FileRequest), the same delivery (Courier: backpressure), the same limits (RatePacer: the engine's shares).
/// A download stats the file, then reads it with many requests on their way at once (the latency of a link is
/// paid once, not per piece); an upload writes the same way and closes the file before it says it is done.
/// Made on the task's work queue, then touched only on the transport's thread.
final class SFTPTransfer: @unchecked Sendable {
    let courier: Courier
    var delivery: Courier.Delivery { courier.delivery }
    private let transport: CurlTransport
    private let task: URLSessionTask
    private let delegate: TransportDelegate?
    private let file: FileRequest
    private let who: SSHLogin
    private let idleTimeout: TimeInterval
    /// An upload's bytes go to the path with this suffix, renamed to the path once whole (`put --remote-temp`);
    /// its stat and read-back (a resume's) look at that name too.
    private let remoteTemp: String?

    /// Reads and writes go out this large (OpenSSH's sftp-server answers up to 256 KiB), 16 at once: 2 MiB on their
    /// way, what OpenSSH's channel window lets through per round trip (a link of 100 MB/s with 20 ms of latency).
    /// Fewer for each of several ranges cost a 20 ms link more than half its speed (4 ranges at 4 pieces: 13.5 s
    /// for a GiB, 5.5 s at 16); what comes back is held only until the delegate's bound lets it go (Courier).
    static let pieceSize = 128 << 10
    static let piecesAtOnce = 16

    private var connection: SFTPConnection?
    private var begun = false
    private(set) var over = false
    private var handle: Data?
    /// An open (or opendir) is on its way: the handle it brings back would be left open by a stop now.
    private var opening = false
    private var answered = false
    /// When bytes last moved (or a wait that is not the server's ended): the idle timeout counts from here.
    private var lastProgress: TimeInterval = 0
    /// Waiting for its rate, for room on the way to the delegate, or for an upload's body: not idle.
    private var waiting = false

    private(set) var limits: LimitMembership?
    private(set) var pacer = RatePacer()

    // A download: the part of the file asked, what was asked of it so far, what came back out of order, and
    // what is not handed on yet.
    private var statted = false
    /// The engine has had the answer (Courier.afterHandover): reads may go.
    private var answerTaken = false
    /// The server did not say the file's size: it is read to its end.
    private var sizeUnknown = false
    /// Some of the file came back.
    private var readAny = false
    private var nextOffset: Int64 = 0
    private var endOffset: Int64 = 0
    private var reads = 0
    private var arrived: [Int64: Data] = [:]
    private var deliverAt: Int64 = 0
    private var pending = Data()

    // An upload.
    private var body: BodySource?
    private var writeAt: Int64 = 0
    private var writes = 0
    private var bodyEnded = false
    private var closing = false
    /// A write was refused and the server's free space is being asked (askWhetherFull): nothing more goes.
    private var askingSpace = false

    /// Where an upload's body is read into, a piece at a time.
    private var scratch: UnsafeMutableRawPointer?

    // A listing.
    private var lines: [String] = []

    init?(request: URLRequest, task: URLSessionTask, delegate: TransportDelegate?, settings: TransportSettings, delivery: Courier.Delivery, transport: CurlTransport) {
        guard let file = FileRequest(request: request), file.scheme == .sftp else { return nil }
        self.file = file
        self.task = task
        self.delegate = delegate
        self.transport = transport
        who = SSHLogin(url: file.url, settings: settings.ssh, netrc: file.netrc,
                       askingAgent: request.value(forHTTPHeaderField: TransferScheme.sshAgentHeader))
        // What the connection's arguments read once (`ssh -G`, /proc/cpuinfo), read here, off the transport's thread.
        _ = SSHHostConfig.defaults
        _ = SFTPConnection.hasAESInstructions
        idleTimeout = max(1, request.timeoutInterval)
        // Only the suffix ferry uses: the header is the engine's, never a server's words.
        remoteTemp = request.value(forHTTPHeaderField: TransferScheme.remoteTempHeader) == UploadSpec.remoteTempSuffix
            ? UploadSpec.remoteTempSuffix : nil
        courier = Courier(delivery: delivery, transport: transport, delegate: delegate)
        // Weak: the courier is the transfer's own (a strong capture would keep every finished transfer).
        courier.drained = { [transport, weak self] in if let self { transport.submit(.wakeSFTP(self)) } }
    }

    deinit {
        scratch?.deallocate()
    }

    // MARK: Its course (transport thread)

    func start(_ connections: SFTPConnections, now: TimeInterval) {
        lastProgress = now
        if let (kind, refusal) = file.refusal {
            fail(.unsupportedURL, kind, refusal)
            return
        }
        if let unsafe = who.unsafeName {
            fail(.badURL, .badURL, unsafe)
            return
        }
        limits = delegate?.transportLimits(for: task)
        if case .put = file.ask {
            switch delegate?.transportBody(for: task) {
            case let .stream(stream): body = StreamBodySource(stream)
            case let .pipe(path): body = PipeBodySource(path: path)
            case nil: break
            }
            body?.onReady = { [transport, weak self] in if let self { transport.submit(.wakeSFTP(self)) } }
        }
        connect(connections)
    }

    private func connect(_ connections: SFTPConnections) {
        let connection = connections.take(who, idleTimeout: idleTimeout)
        self.connection = connection
        reused = connection.state == .ready
        answersBefore = connection.answers
        connection.onChange = { [unowned self] in connectionChanged() }
        connectionChanged()
    }

    /// The connection had carried transfers before this one, and had answered this many requests when it came.
    private var reused = false
    private var answersBefore = 0

    private func connectionChanged() {
        guard !over, let connection else { return }
        switch connection.state {
        case .starting: break
        case .ready:
            guard !begun else { return }
            begun = true
            lastProgress = monotonicSeconds()
            begin(connection)
        case .ended:
            // A kept connection the server had closed meanwhile, found out before it answered anything of this
            // transfer's (nothing was read or written): once more on a new one, as libcurl does with a stale one.
            if reused, connection.answers == answersBefore {
                begun = false
                opening = false
                reads = 0
                writes = 0
                return connect(transport.sftpConnections)
            }
            let (code, kind, message) = connection.failure
                ?? (.networkConnectionLost, .connectionLost, "the SSH session with \(hostDescription(file.url)) ended")
            fail(code, kind, message)
        }
    }

    /// The path as the server names it: `/~/x` is `x` in the login's home directory; a directory's without its `/`.
    private var finalPath: String {
        var path = file.url.path(percentEncoded: false)
        if path == "/~" || path == "/~/" { return "." }
        if path.hasPrefix("/~/") { path = String(path.dropFirst(3)) }
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }

    /// The path the request's file operations use: an upload's temporary name while it is not whole.
    private var path: String {
        switch file.ask {
        case .put, .head, .get: remoteTemp.map { finalPath + $0 } ?? finalPath
        default: finalPath
        }
    }

    private func begin(_ connection: SFTPConnection) {
        let path = path
        switch file.ask {
        case .head:
            connection.send(.stat, { $0.string(path) }) { [unowned self] reply in
                switch reply {
                case let .attributes(found): done(answer(status: 200, FileRequest.headers(size: found.size, mtime: found.mtime, ranges: true)))
                case .status(.noSuchFile, _, _): done(answer(status: 404, [:]))
                default: failed(reply)
                }
            }
        case let .get(from, end, ifRange):
            // The stat and the open go out together: the file's first bytes are one round trip nearer.
            connection.send(.stat, { $0.string(path) }) { [unowned self] reply in
                guard case let .attributes(found) = reply else { return failed(reply) }
                if found.isDirectory {
                    return fail(.cannotOpenFile, .isDirectory, "\(TerminalSafe.redactedURL(file.url)) is a directory: ferry get takes a file",
                                settles: true)
                }
                // A size of 0 may be a file whose size says nothing (Linux's /proc and /sys files: OpenSSH's sftp
                // reads them to their end): it is read to its end too (an empty file's first read says so).
                let size = found.size == 0 ? nil : found.size
                let plan = FileRequest.plan(from: from, end: end, ifRange: ifRange, size: size, mtime: found.mtime, ranges: true)
                deliver(answer(status: plan.status, plan.headers))
                // Nothing is read before the engine has had the answer: it may stop this stream at once (a probe
                // it splits into ranges), and reads on their way meanwhile cost the server 2 MiB it sent for nothing.
                courier.afterHandover { [transport, weak self] in if let self { transport.submit(.answeredSFTP(self)) } }
                statted = true
                sizeUnknown = size == nil
                nextOffset = plan.range?.from ?? 0
                deliverAt = nextOffset
                endOffset = plan.fetch ? plan.range?.end ?? size ?? Int64.max : nextOffset
                pump()
            }
            opening = true
            connection.send(.open, { $0.string(path); $0.uint32(SFTPPacket.OpenFlags.read.rawValue); $0.noAttributes() }) { [unowned self] reply in
                opening = false
                guard case let .handle(handle) = reply else { return failed(reply) }
                self.handle = handle
                pump()
            }
        case let .put(from):
            guard body != nil else { return fail(.unknown, .other, "an upload without a body") }
            writeAt = from
            let flags: SFTPPacket.OpenFlags = from > 0 ? [.write, .create] : [.write, .create, .truncate]
            opening = true
            connection.send(.open, { $0.string(path); $0.uint32(flags.rawValue); $0.noAttributes() }) { [unowned self] reply in
                opening = false
                guard case let .handle(handle) = reply else { return failed(reply) }
                self.handle = handle
                pump()
            }
        case .list:
            opening = true
            connection.send(.opendir, { $0.string(path) }) { [unowned self] reply in
                opening = false
                guard case let .handle(handle) = reply else { return failed(reply) }
                self.handle = handle
                readDirectory()
            }
        case .makeDirectory:
            connection.send(.mkdir, { $0.string(path); $0.noAttributes() }) { [unowned self] reply in
                // Refused (there already, or not allowed): 405, as FileWire answers it; the uploads into it say which.
                guard case let .status(status, _, _) = reply else { return failed(reply) }
                done(answer(status: status == .ok ? 201 : 405, ["Content-Length": "0"]))
            }
        case .unsupported:
            break
        }
    }

    /// Sends what may go now: reads of the part asked, or writes of the body, up to `piecesAtOnce`, under the
    /// rates and while the delegate keeps up.
    private func pump() {
        guard !over, let connection, let handle else { return }
        let now = monotonicSeconds()
        if case .put = file.ask {
            pumpWrites(connection, handle, now)
            return
        }
        guard statted, answerTaken else { return }
        // A file of unknown size is asked one piece until it has said it has one (an empty file: one read).
        let atOnce = sizeUnknown && !readAny ? 1 : Self.piecesAtOnce
        while reads < atOnce, nextOffset < endOffset {
            if courier.mustWait() {
                waiting = true
                break
            }
            guard let count = allowed(Int(min(Int64(Self.pieceSize), endOffset - nextOffset)), now) else { break }
            if pacer.limited { pacer.spend(count, now: now) }
            read(connection, handle, at: nextOffset, count)
            nextOffset += Int64(count)
        }
        if nextOffset >= endOffset, reads == 0 {
            flush()
            connection.send(.close, { $0.string(handle) }) { _ in }
            done(nil)
        }
    }

    private func read(_ connection: SFTPConnection, _ handle: Data, at offset: Int64, _ count: Int) {
        reads += 1
        connection.send(.read, { $0.string(handle); $0.uint64(UInt64(offset)); $0.uint32(UInt32(count)) }) { [unowned self] reply in
            reads -= 1
            switch reply {
            case let .data(data) where data.count > count:
                return fail(.badServerResponse, .protocol, "\(hostDescription(file.url)) answered a read of \(count) bytes with \(data.count)")
            case let .data(data) where !data.isEmpty:
                guard offset < endOffset else { break }
                received(data, at: offset)
                // A short answer: the rest of the piece is asked again.
                if data.count < count { self.read(connection, handle, at: offset + Int64(data.count), count - data.count) }
            case .status(.eof, _, _) where sizeUnknown, .data where sizeUnknown:
                // A file whose size the server did not say ends where reading it ends (reads past it answer so too).
                endOffset = min(endOffset, offset)
                nextOffset = min(nextOffset, endOffset)
            case .status(.eof, _, _), .data:
                let host = hostDescription(file.url)
                return fail(.networkConnectionLost, .connectionLost,
                            "\(TerminalSafe.sanitize(path)) on \(host) ended at \(offset) bytes, short of what its size said: it changed while it was read")
            default:
                return failed(reply)
            }
            pump()
        }
    }

    private func received(_ data: Data, at offset: Int64) {
        readAny = true
        lastProgress = monotonicSeconds()
        pacer.count(data.count)
        if offset == deliverAt {
            take(data)
            while let next = arrived.removeValue(forKey: deliverAt) { take(next) }
        } else {
            arrived[offset] = data
        }
    }

    private func take(_ data: Data) {
        if pending.isEmpty { pending.reserveCapacity(min(deliverySize, Int(max(Int64(data.count), endOffset - deliverAt)))) }
        pending.append(data)
        deliverAt += Int64(data.count)
        if pending.count >= deliverySize { flush() }
    }

    private var deliverySize: Int { min(CurlTransfer.maxDeliverySize, courier.maxBytesInFlight / 2) }

    private func pumpWrites(_ connection: SFTPConnection, _ handle: Data, _ now: TimeInterval) {
        guard let body, !closing, !askingSpace else { return }
        let scratch = self.scratch ?? UnsafeMutableRawPointer.allocate(byteCount: Self.pieceSize, alignment: 16)
        self.scratch = scratch
        while writes < Self.piecesAtOnce, !bodyEnded {
            guard let count = allowed(Self.pieceSize, now) else { return }
            var piece = Data()
            let read: Int?
            do throws(BodyReadError) {
                read = try body.read(into: scratch, count: count)
                if let read, read > 0 { piece = Data(bytes: scratch, count: read) }
            } catch {
                return fail(.cannotOpenFile, error.kind, error.message)
            }
            guard let read else {
                // The body has nothing yet (a pipe): it says when it has (onReady).
                waiting = true
                return
            }
            if read == 0 {
                bodyEnded = true
                break
            }
            if pacer.limited { pacer.spend(read, now: now) }
            pacer.count(read)
            writes += 1
            connection.write(handle: handle, offset: writeAt, data: piece) { [unowned self] reply in
                writes -= 1
                guard case .status(.ok, _, _) = reply else { return failed(reply) }
                lastProgress = monotonicSeconds()
                delegate?.transportDidSend(for: task, bytes: Int64(read))
                pump()
            }
            writeAt += Int64(read)
        }
        guard bodyEnded, writes == 0 else { return }
        // Done once the server has closed the file (a full disk may only say so then).
        closing = true
        connection.send(.close, { $0.string(handle) }) { [unowned self] reply in
            guard case .status(.ok, _, _) = reply else { return failed(reply) }
            self.handle = nil
            guard remoteTemp != nil else { return done(answer(status: 201, ["Content-Length": "0"])) }
            renameWhole(connection)
        }
    }

    /// `put --remote-temp`: the whole file takes its name, replacing what is there in one step (OpenSSH's
    /// `posix-rename@openssh.com`; a server without it gets SFTP's own rename, which refuses a name in use).
    private func renameWhole(_ connection: SFTPConnection) {
        let from = path, to = finalPath
        let renamed = { [unowned self] (reply: SFTPPacket.Reply) in
            if case .status(.ok, _, _) = reply { return done(answer(status: 201, ["Content-Length": "0"])) }
            guard case let .status(status, code, message) = reply else { return failed(reply) }
            let said = Self.serverWords(message).map { " (\($0))" } ?? ""
            fail(.cannotWriteToFile, status == .permissionDenied ? .noPermission : .other,
                 "\(hostDescription(file.url)) could not rename \(TerminalSafe.sanitize(from)) to \(TerminalSafe.sanitize(to)): SFTP status \(code)\(said)",
                 settles: true)
        }
        if connection.extensions.contains("posix-rename@openssh.com") {
            connection.send(.extended, { $0.string("posix-rename@openssh.com"); $0.string(from); $0.string(to) }, reply: renamed)
        } else {
            connection.send(.rename, { $0.string(from); $0.string(to) }, reply: renamed)
        }
    }

    private func readDirectory() {
        guard let connection, let handle else { return }
        connection.send(.readdir, { $0.string(handle) }) { [unowned self] reply in
            switch reply {
            case let .name(entries):
                lastProgress = monotonicSeconds()
                // `ls -l` lines, as the server wrote them (DirectoryLines reads them); a name that would break a
                // line is left out.
                for entry in entries where entry.filename != "." && entry.filename != ".." {
                    guard !entry.filename.contains(where: \.isNewline), !entry.longname.contains(where: \.isNewline) else { continue }
                    lines.append(entry.longname)
                }
                readDirectory()
            case .status(.eof, _, _):
                connection.send(.close, { $0.string(handle) }) { _ in }
                deliver(answer(status: 200, ["Content-Type": DirectoryLines.contentType]))
                pending = Data(lines.map { $0 + "\n" }.joined().utf8)
                done(nil)
            default:
                failed(reply)
            }
        }
    }

    // MARK: Waits

    /// How much of `wanted` bytes may go out now under the rates (at least 16 KiB once any may: a piece is not cut
    /// finer than libcurl's); nil when none may: it then waits for its rate.
    private func allowed(_ wanted: Int, _ now: TimeInterval) -> Int? {
        guard pacer.limited else { return wanted }
        let allowed = pacer.allowance(now)
        guard allowed > 0 else {
            waitForRate(now)
            return nil
        }
        return min(wanted, max(allowed, 16 << 10))
    }

    private func waitForRate(_ now: TimeInterval) {
        waiting = true
        pacer.hold(now)
        transport.waitForRate(self)
    }

    /// The engine has had the download's answer and did not stop it: its reads go.
    func answerHandedOver() {
        guard !over else { return }
        answerTaken = true
        lastProgress = monotonicSeconds()
        pump()
    }

    /// Room on the way to the delegate, an upload's body, or its rate: it goes on.
    func wake() {
        guard !over else { return }
        waiting = false
        lastProgress = monotonicSeconds()
        pump()
    }

    /// The idle timeout: nothing from the server for that long while it was not waiting on ferry's side.
    func checkIdle(now: TimeInterval) {
        // Any reply on its connection (its own: a connection carries one transfer) or a line of ssh's as it logs in.
        let heard = max(lastProgress, connection?.lastHeard ?? 0)
        guard !over, !waiting, now - heard > idleTimeout else { return }
        let seconds = Int(idleTimeout.rounded())
        fail(.timedOut, .timedOut, "timed out: nothing from \(hostDescription(file.url)) for \(seconds) s (the idle timeout)")
    }

    // MARK: Answers and ends

    private func answer(status: Int, _ headers: [String: String]) -> HTTPURLResponse? {
        guard !answered else { return nil }
        answered = true
        var headers = headers
        if let peer = connection?.peer { headers[TransferScheme.hostKeyHeader] = peer }
        return HTTPURLResponse(url: file.url, statusCode: status, httpVersion: nil, headerFields: headers)
    }

    private func deliver(_ answer: HTTPURLResponse?) {
        guard let answer else { return }
        courier.deliver { $0 { $1.urlProtocol($0, didReceive: answer, cacheStoragePolicy: .notAllowed) } }
    }

    /// Hands what was read so far to URLSession (the transport calls it at the end of each round).
    func flush() {
        guard !pending.isEmpty else { return }
        let chunk = pending
        pending = Data()
        courier.deliver(bytes: chunk.count) { $0 { $1.urlProtocol($0, didLoad: chunk) } }
    }

    /// It ended well: the connection goes back for the next transfer with this login.
    private func done(_ answer: HTTPURLResponse?) {
        guard !over else { return }
        deliver(answer)
        flush()
        finish { $0 { $1.urlProtocolDidFinishLoading($0) } }
        if let connection { transport.sftpConnections.giveBack(connection, now: monotonicSeconds()) }
        connection = nil
        transport.sftpEnded(self)
    }

    /// A reply that is not what was asked for: a status in ferry's words.
    private func failed(_ reply: SFTPPacket.Reply) {
        guard !askingSpace else { return }
        let host = hostDescription(file.url)
        let shown = TerminalSafe.sanitize(path)
        guard case let .status(status, code, message) = reply else {
            return fail(.badServerResponse, .protocol, "\(host) answered an SFTP request with something else")
        }
        let said = Self.serverWords(message).map { " (\($0))" } ?? ""
        let upload = { if case .put = file.ask { true } else { false } }()
        switch status {
        case .noSuchFile:
            let (code, kind, words) = file.noSuchFile
            fail(code, kind, words, settles: true)
        case .permissionDenied:
            let (code, kind, words) = file.permissionDenied(Self.serverWords(message))
            fail(code, kind, words, settles: true)
        case .noConnection, .connectionLost:
            fail(.networkConnectionLost, .connectionLost, "the SSH session with \(host) was lost\(said)")
        case .failure where upload && handle != nil:
            // sftp-server says "Failure" for what it cannot tell apart; a full disk shows in the server's free space.
            askWhetherFull("\(host) could not write \(shown): SFTP status \(code)\(said)")
        default:
            // sftp-server says "Failure" for what it cannot tell apart (a full disk, a directory where a file is asked).
            let doing = upload ? "write" : "read"
            fail(.cannotOpenFile, .other, "\(host) could not \(doing) \(shown): SFTP status \(code)\(said)", settles: true)
        }
    }

    /// An upload's write was refused: the space left on the server's file system (OpenSSH's `statvfs@openssh.com`)
    /// tells a full disk from another refusal. Nothing more is written meanwhile; what else comes back is not said.
    private func askWhetherFull(_ otherwise: String) {
        guard let connection, connection.extensions.contains("statvfs@openssh.com") else {
            return fail(.cannotOpenFile, .other, otherwise, settles: true)
        }
        guard !askingSpace else { return }
        askingSpace = true
        let host = hostDescription(file.url)
        let shown = TerminalSafe.sanitize(path)
        let path = path
        connection.send(.extended, { $0.string("statvfs@openssh.com"); $0.string(path) }) { [unowned self] reply in
            if case let .extended(data) = reply, let free = SFTPPacket.spaceAvailable(data), free < Self.fullBelow {
                return fail(.cannotWriteToFile, .diskFull,
                            "the disk (or the quota) on \(host) is full: \(shown) (\(ByteFormat.bytes(free)) free there)", settles: true)
            }
            fail(.cannotOpenFile, .other, otherwise, settles: true)
        }
    }

    /// A write refused with less than this free on the server's file system was refused for the space.
    static let fullBelow: Int64 = 1 << 20

    /// A status reply's message, safe for a terminal and cut short; nil for none.
    private static func serverWords(_ message: String) -> String? {
        message.isEmpty ? nil : TerminalSafe.sanitize(String(message.prefix(200)))
    }

    /// `settles`: the server refused a request and the connection is sound: it is kept (letGo).
    private func fail(_ code: URLError.Code, _ kind: FailureKind, _ message: String, settles: Bool = false) {
        guard !over else { return }
        flush()
        var info: [String: Any] = [NSLocalizedDescriptionKey: message, NSURLErrorFailingURLErrorKey: file.url]
        info[FailureKind.userInfoKey] = kind.rawValue
        let error = URLError(code, userInfo: info)
        finish { $0 { $1.urlProtocol($0, didFailWithError: error) } }
        letGo(keep: settles)
        transport.sftpEnded(self)
    }

    /// Its connection, after a stop part way: kept when asked (what is on its way is answered to no one, the file
    /// it had open is closed, as the server's log then says), else closed.
    private func letGo(keep: Bool) {
        guard let connection else { return }
        self.connection = nil
        guard keep, connection.state == .ready, !opening else {
            connection.onChange = nil
            connection.close()
            return
        }
        connection.abandonReplies()
        if let handle { connection.send(.close, { $0.string(handle) }) { _ in } }
        transport.sftpConnections.settle(connection, now: monotonicSeconds())
    }

    private func finish(_ last: @escaping @Sendable (Courier.Delivery) -> Void) {
        over = true
        body?.close()
        courier.deliver { delivery in
            last(delivery)
            delivery.end()
        }
    }

    /// Cancelled (URLSession told the client itself): its connection is closed, nothing more is said.
    func stopped() {
        guard !over else { return }
        over = true
        body?.close()
        letGo(keep: true)
    }
}

extension SFTPTransfer: PacedTransfer {
    func measureIntake(over interval: TimeInterval) { pacer.measureIntake(over: interval) }
    func share(_ shared: SharedBucket?) { pacer.share(shared) }
    func shareItem(_ bucket: SharedBucket?) { pacer.shareItem(bucket) }
    func shareBatch(_ bucket: SharedBucket?) { pacer.shareBatch(bucket) }
    func setRate(_ rate: Double?, now: TimeInterval) { pacer.setRate(rate, now: now) }
    func rateChanged(now: TimeInterval) { pacer.ratesChanged(now: now) }
    func rateWaitEnded() { pacer.waitEnded() }
}
