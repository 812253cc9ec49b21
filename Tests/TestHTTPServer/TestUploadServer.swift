import FerryModel
import FerryStorage
import Foundation
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import NIOResumableUpload

/// An upload server on 127.0.0.1 that keeps what it receives: the IETF resumable-upload protocol as
/// swift-nio-extras serves it (`NIOResumableUpload`, interop versions 3, 5 and 6, over an application that
/// stores each PUT or POST), tus 1.0 (core, creation, termination; ours, after tus.io's text), or plain
/// uploads. It counts every body byte it receives (what was sent twice shows), and can cut or hold a
/// connection part-way, and forget its uploads, on purpose.
public final class TestUploadServer: @unchecked Sendable {
    public enum Kind: String, Sendable {
        case ietf, tus, plain
        /// A server of interop version 3 only (iOS 17's): any other version is refused with 400.
        case ietf3
        /// An IETF server that keeps nothing of a cut request (as many tus servers do): each request's bytes are
        /// handed to the upload only once all of them arrived.
        case ietfKeepsNothing = "ietf-keeps-nothing"
    }

    /// One upload the server finished: its length, its SHA-256, and its bytes while they are few.
    public struct Stored: Sendable {
        public var length: Int64 = 0
        public var sha256 = ""
        public var data: Data?
    }

    public struct Request: Sendable {
        public var method: String
        public var uri: String
        public var headers: [(name: String, value: String)]
        public func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }

    /// Bytes of an upload kept in memory for a test to compare (above it, only the length and hash).
    public static let keptBytes = 64 << 20

    struct State {
        var rawBytes: Int64 = 0
        var bodyBytes: Int64 = 0
        var requests: [Request] = []
        var stored: [String: Stored] = [:]
        /// Cut the next connection that has received this many bytes (once).
        var cutAfter: Int64?
        /// Stop reading the next connection that has received this many bytes (once).
        var holdAfter: Int64?
        var held = 0
        var heldChannels: [Channel] = []
        var context: HTTPResumableUploadContext?
        var tus: [Int: TusUpload] = [:]
        var nextTus = 1
        var keepsBytes = true
        /// tus: answer the next PATCH with 409 (an offset conflict), once.
        var conflictOnce = false
        /// tus: how every PATCH is answered from now on.
        var patches = PatchAnswer.honest
        /// tus: the bytes of a PATCH cut before its end are kept (tusd on a disk) or dropped (PyPI's
        /// resumable-upload, the official Node server, many framework integrations: the worst, the default).
        var keepsCutPatches = false
        /// tus: a PATCH of more bytes is refused with 413 (Supabase takes 6 MiB chunks).
        var largestPatch: Int64?
        /// tus: a PATCH over `largestPatch` gets no answer: the connection is reset on its head.
        var resetsLargePatches = false
        var patchAnswerDelay: TimeAmount?
    }

    /// How a tus server answers a PATCH: as the protocol says, or as the broken servers a client meets do.
    public enum PatchAnswer: Sendable {
        case honest
        /// 204 with the offset it had before: it keeps none of the bytes (and reads them all).
        case keepsNothing
        /// 204 with an offset past the upload's length.
        case claimsMore
    }

    struct TusUpload {
        var length: Int64
        var offset: Int64 = 0
        var hasher = SHA256()
        var data: Data? = Data()
        var metadata: String?
    }

    public let kind: Kind
    public private(set) var port = 0
    let state = NIOLockedValueBox(State())
    private let group: MultiThreadedEventLoopGroup
    private var channel: Channel?

    public init(_ kind: Kind) throws {
        self.kind = kind
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(ByteMeter(server: self))
                    try sync.configureHTTPServerPipeline()
                    try sync.addHandler(RequestMeter(server: self))
                    switch kind {
                    case .tus:
                        try sync.addHandler(TusHandler(server: self))
                    case .ietf, .plain, .ietf3, .ietfKeepsNothing:
                        // (A server of version 3 is the gate and the plain application: swift-nio-extras' handler
                        // passes reads on only for requests it saw, so behind the gate the socket went unread.)
                        if kind == .ietf3 { try sync.addHandler(VersionGate(accepted: "3")) }
                        try sync.addHandler(HTTP1ToHTTPServerCodec(secure: false))
                        if kind == .ietfKeepsNothing { try sync.addHandler(WholeRequestsOnly()) }
                        if kind == .ietf || kind == .ietfKeepsNothing, let context = state.withLockedValue({ $0.context }) {
                            try sync.addHandler(HTTPResumableUploadHandler(context: context, channelConfigurator: { [self] upload in
                                try? upload.pipeline.syncOperations.addHandler(UploadSink(server: self))
                            }))
                        } else {
                            try sync.addHandler(UploadSink(server: self))
                        }
                    }
                }
            }
        channel = try bootstrap.bind(host: "127.0.0.1", port: 0).wait()
        port = channel?.localAddress?.port ?? 0
        forgetUploads()
    }

    deinit { shutdown() }

    public func shutdown() {
        try? channel?.close().wait()
        channel = nil
        try? group.syncShutdownGracefully()
    }

    public func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// Every upload in progress is forgotten (a HEAD or PATCH on its location gets 404).
    public func forgetUploads() {
        let origin = "http://127.0.0.1:\(port)"
        state.withLockedValue {
            $0.context = HTTPResumableUploadContext(origin: origin)
            $0.tus = [:]
        }
    }

    /// Closes the next connection that has received `bytes` bytes (request heads included), once.
    public func cutOnce(after bytes: Int64) { state.withLockedValue { $0.cutAfter = bytes } }
    /// Stops reading the next connection that has received `bytes` bytes, once: the client's writes stall.
    public func holdOnce(after bytes: Int64) { state.withLockedValue { $0.holdAfter = bytes } }
    /// tus: the next PATCH is answered 409 Conflict whatever its offset, once.
    public func conflictOnce() { state.withLockedValue { $0.conflictOnce = true } }
    /// tus: every PATCH from now on is answered so.
    public func answerPatches(_ answer: PatchAnswer) { state.withLockedValue { $0.patches = answer } }

    /// Closes the connections held so far (`holdOnce`): a cut at a moment the test chose, after the client
    /// has seen everything the server sent before it (a cut by `cutOnce` may reset the connection before the
    /// client has read a 104 that the server wrote).
    public func cutHeld() {
        let channels = state.withLockedValue { s -> [Channel] in
            defer { s.heldChannels = [] }
            return s.heldChannels
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// Whether finished uploads keep their first `keptBytes` (a benchmark's server keeps only lengths and hashes).
    public var keepsBytes: Bool {
        get { state.withLockedValue { $0.keepsBytes } }
        set { state.withLockedValue { $0.keepsBytes = newValue } }
    }
    /// tus: whether the bytes of a PATCH cut before its end are kept (false, the default: as the strictest
    /// servers, which commit a PATCH only when all of it arrived).
    public var keepsCutPatches: Bool {
        get { state.withLockedValue { $0.keepsCutPatches } }
        set { state.withLockedValue { $0.keepsCutPatches = newValue } }
    }

    /// tus: PATCHes of more bytes are refused (413), as Supabase refuses more than 6 MiB.
    public var largestPatch: Int64? {
        get { state.withLockedValue { $0.largestPatch } }
        set { state.withLockedValue { $0.largestPatch = newValue } }
    }

    /// tus: a PATCH over `largestPatch` is refused by resetting the connection, unanswered (what a client meets when
    /// a server that closes a refused request's unread body sits behind a proxy: its 413 is lost with the reset).
    public var resetsLargePatches: Bool {
        get { state.withLockedValue { $0.resetsLargePatches } }
        set { state.withLockedValue { $0.resetsLargePatches = newValue } }
    }

    /// tus: a PATCH that is taken is answered this long after its last byte arrived (a link's round trip and a
    /// server's commit; a refusal is answered at once, on the request's head).
    public var patchAnswerDelay: TimeAmount? {
        get { state.withLockedValue { $0.patchAnswerDelay } }
        set { state.withLockedValue { $0.patchAnswerDelay = newValue } }
    }

    public var held: Int { state.withLockedValue { $0.held } }

    /// Body bytes received, over every request and connection.
    public var bodyBytes: Int64 { state.withLockedValue { $0.bodyBytes } }
    public var requests: [Request] { state.withLockedValue { $0.requests } }
    public func stored(_ path: String) -> Stored? { state.withLockedValue { $0.stored[path] } }
    public var storedPaths: [String] { state.withLockedValue { Array($0.stored.keys).sorted() } }
    /// tus: the offset of the upload at `path`, while the server has it.
    public func tusOffset(_ path: String) -> Int64? {
        guard let id = Int(path.split(separator: "/").last ?? "") else { return nil }
        return state.withLockedValue { $0.tus[id]?.offset }
    }

    /// What `GET /_stats` answers (for scripts): body bytes received and the uploads stored.
    func statsJSON() -> Data {
        let (body, raw, stored) = state.withLockedValue { ($0.bodyBytes, $0.rawBytes, $0.stored) }
        var uploads: [String: [String: String]] = [:]
        for (path, item) in stored { uploads[path] = ["length": String(item.length), "sha256": item.sha256] }
        let object: [String: Any] = ["bodyBytes": body, "rawBytes": raw, "uploads": uploads]
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    }

    static func hex(_ digest: SHA256.Digest) -> String { digest.map { String(format: "%02x", $0) }.joined() }
}

/// Counts a connection's bytes and cuts or holds it when told to.
private final class ByteMeter: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let server: TestUploadServer
    private var seen: Int64 = 0
    private var holding = false

    init(server: TestUploadServer) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !holding else { return }  // read before the hold took effect: never reaches the server
        var buffer = unwrapInboundIn(data)
        let count = Int64(buffer.readableBytes)
        enum Act { case pass, cut(Int64), hold(Int64) }
        let act = server.state.withLockedValue { s -> Act in
            if let limit = s.cutAfter, seen + count >= limit {
                s.cutAfter = nil
                return .cut(limit - seen)
            }
            if let limit = s.holdAfter, seen + count >= limit {
                s.holdAfter = nil
                s.held += 1
                s.heldChannels.append(context.channel)
                return .hold(limit - seen)
            }
            return .pass
        }
        var forward = count
        switch act {
        case .pass: break
        case let .cut(keep), let .hold(keep): forward = max(0, keep)
        }
        if forward < count { buffer = buffer.getSlice(at: buffer.readerIndex, length: Int(forward)) ?? ByteBuffer() }
        seen += forward
        server.state.withLockedValue { $0.rawBytes += forward }
        if forward > 0 { context.fireChannelRead(wrapInboundOut(buffer)) }
        switch act {
        case .pass: break
        case .cut:
            context.fireChannelReadComplete()
            context.close(promise: nil)
        case .hold:
            holding = true
            context.fireChannelReadComplete()
            _ = context.channel.setOption(ChannelOptions.autoRead, value: false)
        }
    }
}

/// Refuses requests of another interop version of the resumable-upload draft with 400, naming its own, as
/// a server of one version does.
private final class VersionGate: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let accepted: String
    private var refusing = false

    init(accepted: String) { self.accepted = accepted }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head):
            refusing = head.headers["Upload-Draft-Interop-Version"].first.map { $0 != accepted } ?? false
            guard refusing else { return context.fireChannelRead(data) }
            let fields = HTTPHeaders([("Upload-Draft-Interop-Version", accepted), ("Content-Length", "0")])
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: fields))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        case .body:
            if !refusing { context.fireChannelRead(data) }
        case .end:
            if refusing { refusing = false } else { context.fireChannelRead(data) }
        }
    }
}

/// Records each request's head and counts body bytes as the HTTP decoder hands them on.
private final class RequestMeter: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    let server: TestUploadServer

    init(server: TestUploadServer) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head):
            let request = TestUploadServer.Request(method: head.method.rawValue, uri: head.uri,
                                                   headers: head.headers.map { ($0.name, $0.value) })
            server.state.withLockedValue { $0.requests.append(request) }
        case let .body(buffer):
            server.state.withLockedValue { $0.bodyBytes += Int64(buffer.readableBytes) }
        case .end:
            break
        }
        context.fireChannelRead(data)
    }
}

/// Holds each request's body until its end, then hands it on whole; a request cut before its end hands on
/// nothing of it (the resumable-upload handler behind it sees only whole requests, and its offset never counts
/// the bytes of a cut one). Heads go on at once (the 104 with the upload's location is sent on the head).
private final class WholeRequestsOnly: ChannelInboundHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    private var pending: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            pending = nil
            context.fireChannelRead(data)
        case var .body(buffer):
            if pending == nil { pending = buffer } else { pending!.writeBuffer(&buffer) }
        case .end:
            if let whole = pending { context.fireChannelRead(wrapInboundOut(.body(whole))) }
            pending = nil
            context.fireChannelRead(data)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        pending = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        pending = nil
        context.fireErrorCaught(error)
    }
}

/// The application behind the resumable-upload handler (or alone, for plain uploads): stores each PUT or
/// POST body under its path and answers 201 with "stored N bytes"; `GET /_stats` answers the counts.
private final class UploadSink: ChannelInboundHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart
    let server: TestUploadServer
    private var path: String?
    private var hasher = SHA256()
    private var length: Int64 = 0
    private var data: Data? = Data()

    init(server: TestUploadServer) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(request):
            if request.method == .get, request.path == "/_stats" {
                respond(context, status: .ok, body: server.statsJSON())
                return
            }
            guard request.method == .put || request.method == .post else {
                respond(context, status: .methodNotAllowed, body: Data())
                return
            }
            path = request.path
            hasher = SHA256()
            length = 0
            self.data = server.keepsBytes ? Data() : nil
        case let .body(buffer):
            guard path != nil else { return }
            buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            length += Int64(buffer.readableBytes)
            if length <= Int64(TestUploadServer.keptBytes) {
                buffer.withUnsafeReadableBytes { self.data?.append(contentsOf: $0) }
            } else {
                self.data = nil
            }
        case .end:
            guard let path else { return }
            let item = TestUploadServer.Stored(length: length, sha256: TestUploadServer.hex(hasher.finalize()), data: self.data)
            server.state.withLockedValue { $0.stored[path] = item }
            self.path = nil
            respond(context, status: .created, body: Data("stored \(length) bytes\n".utf8))
        }
    }

    private func respond(_ context: ChannelHandlerContext, status: HTTPResponse.Status, body: Data) {
        var head = HTTPResponse(status: status)
        head.headerFields[.contentLength] = String(body.count)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !body.isEmpty { context.write(wrapOutboundOut(.body(ByteBuffer(bytes: body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// tus 1.0, core with the creation and termination extensions: `POST /files` makes an upload, `HEAD` tells
/// its offset, `PATCH` appends at exactly that offset (409 otherwise), `DELETE` ends it. The bytes of a PATCH
/// count once all of it arrived (a cut one keeps nothing), or as they arrive (`keepsCutPatches`).
private final class TusHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let server: TestUploadServer
    /// The upload a PATCH under way appends to.
    private var appending: Int?
    private var answered = false
    /// The bytes of the PATCH under way not yet kept (a server that keeps only whole PATCHes).
    private var pending = ByteBuffer()

    init(server: TestUploadServer) { self.server = server }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head):
            appending = nil
            answered = false
            pending.clear()
            handle(head, context)
        case var .body(buffer):
            guard let id = appending else { return }
            let keepsNow = server.state.withLockedValue { $0.keepsCutPatches }
            if !keepsNow {
                // Kept at the end of the request, if it comes.
                guard Int64(pending.readableBytes + buffer.readableBytes) <= Int64(TestUploadServer.keptBytes) else {
                    appending = nil
                    return respond(context, .payloadTooLarge, [], body: "a PATCH this server holds is at most \(TestUploadServer.keptBytes) bytes")
                }
                pending.writeBuffer(&buffer)
                return
            }
            if !keep(buffer, id) {
                appending = nil
                respond(context, .badRequest, [], body: "more bytes than Upload-Length")
            }
        case .end:
            guard let id = appending, !answered else { return }
            appending = nil
            if pending.readableBytes > 0 {
                let whole = pending
                pending.clear()
                guard keep(whole, id) else { return respond(context, .badRequest, [], body: "more bytes than Upload-Length") }
            }
            let offset = server.state.withLockedValue { s -> Int64? in
                guard let upload = s.tus[id] else { return nil }
                if upload.offset == upload.length {
                    s.stored["/files/\(id)"] = TestUploadServer.Stored(length: upload.length,
                                                                      sha256: TestUploadServer.hex(upload.hasher.finalize()),
                                                                      data: upload.data)
                }
                return upload.offset
            }
            guard let offset else { return respond(context, .notFound, []) }
            let (claimed, delay) = server.state.withLockedValue { s in
                (s.patches == .claimsMore ? s.tus[id].map { $0.length + 1_000 } : nil, s.patchAnswerDelay)
            }
            let fields = [("Upload-Offset", String(claimed ?? offset))]
            guard let delay else { return respond(context, .noContent, fields) }
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            loop.scheduleTask(in: delay) { bound.value.0.respond(bound.value.1, .noContent, fields) }
        }
    }

    /// Appends bytes of a PATCH to the upload (none for a server that keeps nothing); false: more than its length.
    private func keep(_ buffer: ByteBuffer, _ id: Int) -> Bool {
        server.state.withLockedValue { s -> Bool in
            guard var upload = s.tus[id], s.patches != .keepsNothing else { return true }
            guard upload.offset + Int64(buffer.readableBytes) <= upload.length else { return false }
            buffer.withUnsafeReadableBytes { upload.hasher.update(bufferPointer: $0) }
            upload.offset += Int64(buffer.readableBytes)
            if upload.offset <= Int64(TestUploadServer.keptBytes) {
                buffer.withUnsafeReadableBytes { upload.data?.append(contentsOf: $0) }
            } else {
                upload.data = nil
            }
            s.tus[id] = upload
            return true
        }
    }

    private func handle(_ head: HTTPRequestHead, _ context: ChannelHandlerContext) {
        let path = head.uri.split(separator: "?").first.map(String.init) ?? head.uri
        if head.method == .GET, path == "/_stats" {
            return respond(context, .ok, [("Content-Type", "application/json")], body: String(decoding: server.statsJSON(), as: UTF8.self))
        }
        if head.method == .OPTIONS {
            return respond(context, .noContent, [("Tus-Version", "1.0.0"), ("Tus-Extension", "creation,termination")])
        }
        guard head.headers["Tus-Resumable"].first == "1.0.0" else {
            return respond(context, .preconditionFailed, [("Tus-Version", "1.0.0")])
        }
        if head.method == .POST, path == "/files" {
            // A POST without a length is refused, as nginx in front of a tus server refuses it (411).
            guard head.headers["Content-Length"].first != nil || head.headers["Transfer-Encoding"].first != nil else {
                return respond(context, .lengthRequired, [])
            }
            guard let length = head.headers["Upload-Length"].first.flatMap(Int64.init), length >= 0 else {
                return respond(context, .badRequest, [], body: "no Upload-Length")
            }
            let id = server.state.withLockedValue { s -> Int in
                defer { s.nextTus += 1 }
                s.tus[s.nextTus] = TestUploadServer.TusUpload(length: length, data: s.keepsBytes ? Data() : nil,
                                                              metadata: head.headers["Upload-Metadata"].first)
                return s.nextTus
            }
            // A relative location, as tusd may send: the client resolves it.
            return respond(context, .created, [("Location", "/files/\(id)")])
        }
        guard path.hasPrefix("/files/"), let id = Int(path.dropFirst("/files/".count)) else {
            return respond(context, .notFound, [])
        }
        let upload = server.state.withLockedValue { $0.tus[id] }
        guard let upload else { return respond(context, .notFound, []) }
        switch head.method {
        case .HEAD:
            respond(context, .ok, [("Upload-Offset", String(upload.offset)), ("Upload-Length", String(upload.length)),
                                   ("Cache-Control", "no-store")])
        case .PATCH:
            guard head.headers["Content-Type"].first == "application/offset+octet-stream" else {
                return respond(context, .unsupportedMediaType, [])
            }
            let conflict = server.state.withLockedValue { s -> Bool in
                defer { s.conflictOnce = false }
                return s.conflictOnce
            }
            guard !conflict, head.headers["Upload-Offset"].first.flatMap(Int64.init) == upload.offset else {
                return respond(context, .conflict, [("Upload-Offset", String(upload.offset))])
            }
            if let largest = server.state.withLockedValue({ $0.largestPatch }),
               head.headers["Content-Length"].first.flatMap(Int64.init).map({ $0 > largest }) ?? true {
                if server.state.withLockedValue({ $0.resetsLargePatches }) {
                    answered = true
                    return Self.reset(context.channel)
                }
                // At once, on the head, and the connection closed with the body unread (as PyPI's resumable-upload
                // does).
                return respond(context, .payloadTooLarge, [("Connection", "close")], body: "a PATCH carries at most \(largest) bytes here",
                               close: true)
            }
            appending = id
        case .DELETE:
            server.state.withLockedValue { _ = $0.tus.removeValue(forKey: id) }
            respond(context, .noContent, [])
        default:
            respond(context, .methodNotAllowed, [])
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ headers: [(String, String)], body: String = "",
                         close: Bool = false) {
        answered = true
        var fields = HTTPHeaders(headers)
        fields.add(name: "Tus-Resumable", value: "1.0.0")
        fields.add(name: "Content-Length", value: String(body.utf8.count))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: fields))), promise: nil)
        if !body.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil) }
        guard close else { return context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil) }
        // Closed with the body unread, so reset (as a server's kernel resets such a socket).
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in Self.reset(channel) }
    }

    /// Closes the connection with a reset (SO_LINGER 0), not an orderly end.
    private static func reset(_ channel: Channel) {
        guard let socket = channel as? SocketOptionProvider else { return channel.close(promise: nil) }
        socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
    }
}
