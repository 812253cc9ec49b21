import CCurl
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// Carries every http(s) request of ferry's URLSession: libcurl's multi interface, driven by one thread of
/// our own that waits with `curl_multi_poll`, under `FerryURLProtocol`.
///
/// URLSession's own transport (corelibs' `_MultiHandle`) keeps a dispatch write source on a socket once
/// libcurl has asked to write to it, and never removes it when libcurl then asks to read only; an idle
/// socket is always writable, so a transfer waiting for data keeps a core busy (docs/transport.md).
/// `curl_multi_poll` asks libcurl afresh on every wait which sockets to watch and for what.
package final class CurlTransport: @unchecked Sendable {
    /// The process's transport (one thread, one connection cache for every session).
    static let shared = CurlTransport()

    /// libcurl reads the socket this much at a time (it still hands data over 16 KiB per callback:
    /// CurlTransfer gathers it into larger pieces): 256 KiB for a transfer alone, less as more run beside
    /// it, an eighth of its in-flight bound: 32 KiB at eight, 16 KiB (the size it hands over) from sixteen on.
    /// libcurl keeps one such buffer per transfer: 64 HTTP/2 streams held 16 MiB of them at 256 KiB, 2 MiB at
    /// 32 KiB, 1 MiB at 16 KiB (peak RSS 50 -> 49 MiB, no slower; 1,000 small files `-j 8` no slower at 32 KiB).
    static let receiveBufferSize = 256 << 10
    var receiveBufferSize: Int {
        min(Self.receiveBufferSize, max(16 << 10, inFlightBound.load(ordering: .relaxed) / 8))
    }
    /// And sends at most this much per read of the body.
    static let sendBufferSize = 512 << 10
    /// What one transfer may have on its way to the delegate: a share of 2 MiB, at least 128 KiB. A server
    /// that sends in bursts (nginx's limit_rate) fills it every time: 8 ranges held 2 MiB each, 60 MiB RSS.
    let inFlightBound = Atomic<Int>(2 << 20)
    static func inFlightBound(running: Int) -> Int {
        min(2 << 20, max(128 << 10, (2 << 20) / max(1, running)))
    }

    /// Streams at once on one HTTP/2 connection (libcurl's default; a server may allow fewer).
    static let maxStreamsPerConnection = 100

    enum Command {
        case start(CurlTransfer)
        case stop(CurlTransfer)
        case unpause(CurlTransfer)
        /// An sftp transfer (SFTPTransfer, over OpenSSH's client) to start, to cancel, or to go on after a wait.
        case startSFTP(SFTPTransfer)
        case stopSFTP(SFTPTransfer)
        case wakeSFTP(SFTPTransfer)
        /// The engine has had an sftp download's answer: its reads may go.
        case answeredSFTP(SFTPTransfer)
    }

    private let commands = Mutex<[Command]>([])
    /// Touched only on the transport's thread.
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// Transfers with results queued this round (transport thread): posted at the round's end.
    private var posting: [Courier] = []
    /// Transfers that read bytes this round and hold them (transport thread): handed on at the round's end.
    private var holding: [CurlTransfer] = []
    /// Transfers paused for their rate, until their bucket's debt is repaid (transport thread).
    private var rateWaiting: [any PacedTransfer] = []
    /// The sftp transfers running (transport thread), and the connections they run on (SFTPConnections).
    private var sftpRunning: [ObjectIdentifier: SFTPTransfer] = [:]
    let sftpConnections = SFTPConnections()
    /// Every transfer the limits pace (transport thread).
    private var paced: [any PacedTransfer] { Array(running.values) + Array(sftpRunning.values) }
    /// The limited transfers' shares need working out again (a transfer came or went, a limit changed).
    private let sharesChanged = Atomic<Bool>(false)
    /// When the shares were last worked out (transport thread).
    private var lastShareAt: TimeInterval = 0
    /// The engines' own rates, one bucket for each engine's limits and direction (transport thread): kept while
    /// transfers come and go, with the limits they belong to (so that no other limits made later at the same
    /// address take a bucket, and its debt, that is not theirs).
    private var sharedBuckets: [SharedBucketKey: (limits: BandwidthLimits, bucket: SharedBucket)] = [:]
    private struct SharedBucketKey: Hashable {
        let limits: ObjectIdentifier
        let direction: Direction
    }
    /// Each item's own rate as one bucket that outlives its transfers (transport thread), as the engine's does:
    /// an item whose transfers follow one another (a resumable upload's chunks, a range retried) took a new
    /// transfer's quarter second's burst at each (a 64 MiB upload under 100 Mbit/s in 6 MiB chunks went at
    /// 1.6 times its limit). Dropped once its limit is gone, or when full with no transfer of it moving.
    private var itemBuckets: [ItemBucketKey: (limits: BandwidthLimits, bucket: SharedBucket)] = [:]
    /// Each batch's rate (a tree's) as one bucket that its items take from as they come and go, as the engine's
    /// does (a tree's files of 128 KiB, 4 at once, each under a limit of its own with a quarter second's burst,
    /// came at 128 MiB/s under `--limit-rate 20M`). Dropped once its limit is gone, or when full with no transfer
    /// of it moving.
    private var batchBuckets: [ItemBucketKey: (limits: BandwidthLimits, bucket: SharedBucket)] = [:]
    /// An item's or a batch's bucket: whose (the item's or the batch's number), in which direction.
    private struct ItemBucketKey: Hashable {
        let limits: ObjectIdentifier
        let item: Int64
        let direction: Direction
    }
    /// The connection cache of limited transfers (on HTTP/1.1, each on a connection of its own), apart from the
    /// multi's: libcurl 7.88 keeps whether a host multiplexes per host, not per connection, and once a host
    /// had answered over HTTP/2 it took a limited transfer's busy HTTP/1.1 connection for a multiplexed one;
    /// the new request went out in the middle of the limited download, which was published with the other's
    /// response in it. Apart, no other transfer sees those connections.
    let limitedConnections: UnsafeMutableRawPointer?

    private let multi: UnsafeMutableRawPointer?
    /// Why libcurl cannot be used (nil when it can).
    let unavailable: String?

    private init() {
        if ferry_curl_load() != 0 {
            unavailable = ferry_curl_load_error().map { String(cString: $0) } ?? "libcurl cannot be loaded"
            multi = nil
            limitedConnections = nil
            return
        }
        multi = ferry_curl_multi_init()
        limitedConnections = ferry_curl_connection_cache()
        // Without a cache of their own (curl_share_init failed), limited transfers share the multi's: as before.
        unavailable = multi == nil ? "curl_multi_init failed" : nil
        guard let multi else { return }
        // HTTP/2 transfers to one host share a connection (libcurl's default since 7.62, stated), up to
        // this many at once on it (or the server's own limit, if lower); past it another connection opens.
        _ = ferry_curl_multi_setopt_long(multi, FERRY_CURLMOPT_PIPELINING, FERRY_CURLPIPE_MULTIPLEX)
        _ = ferry_curl_multi_setopt_long(multi, FERRY_CURLMOPT_MAX_CONCURRENT_STREAMS, Self.maxStreamsPerConnection)
        let thread = Thread { [self] in loop() }
        thread.name = "ferry.transport"
        thread.start()
    }

    /// libcurl's version line, e.g. "libcurl/7.88.1 OpenSSL/3.0.17 ...".
    package static var libcurlVersion: String {
        guard ferry_curl_load() == 0, let version = ferry_curl_version() else { return "libcurl unavailable" }
        return String(cString: version)
    }

    func submit(_ command: Command) {
        commands.withLock { $0.append(command) }
        if let multi { _ = ferry_curl_multi_wakeup(multi) }
    }

    private func loop() {
        guard let multi else { return }
        while true {
            for command in commands.withLock({ c -> [Command] in defer { c.removeAll() }; return c }) {
                handle(command, multi)
            }
            if sharesChanged.exchange(false, ordering: .acquiringAndReleasing)
                || (!(running.isEmpty && sftpRunning.isEmpty) && monotonicSeconds() - lastShareAt >= 1) { shareLimits() }
            resumeRateWaiters(multi)
            var stillRunning: Int32 = 0
            _ = ferry_curl_multi_perform(multi, &stillRunning)
            serviceSFTP()
            flushHeld()
            var result: Int32 = 0
            while let easy = ferry_curl_multi_next_done(multi, &result) {
                guard let transfer = running.removeValue(forKey: easy) else { continue }
                _ = ferry_curl_multi_remove_handle(multi, easy)
                forget(transfer)
                if let next = transfer.finished(result: Int(result)) {
                    attach(next, multi)
                }
            }
            postResults()
            // With nothing running there is nothing to time: sleep until a command wakes us.
            var timeout: Int32 = running.isEmpty && sftpConnections.isEmpty ? 60_000 : 1_000
            if let next = rateWaiting.compactMap(\.pacer.resumeAt).min() {
                timeout = min(timeout, Int32(max(1, ((next - monotonicSeconds()) * 1000).rounded(.up))))
            }
            var ready: Int32 = 0
            var waits = sftpConnections.descriptors.map { ferry_waitfd(fd: $0.fd, events: $0.events, revents: 0) }
            _ = ferry_curl_multi_poll_fds(multi, &waits, UInt32(waits.count), timeout, &ready)
        }
    }

    /// Called by a transfer (transport thread) that queued its first result of the round.
    func willPost(_ courier: Courier) {
        posting.append(courier)
    }

    /// Called by a transfer (transport thread) that began holding bytes not handed on yet.
    func willHold(_ transfer: CurlTransfer) {
        holding.append(transfer)
    }

    /// Hands on what the transfers that read in this round hold (a walk over every running transfer at every
    /// round cost 64 HTTP/2 streams about 1 % of their CPU). One stopped meanwhile is not its client's any more.
    private func flushHeld() {
        guard !holding.isEmpty else { return }
        let held = holding
        holding = []
        for transfer in held {
            transfer.holdEnded()
            if let easy = transfer.easy, running[easy] != nil { transfer.flush() }
        }
    }

    private func postResults() {
        guard !posting.isEmpty else { return }
        let couriers = posting
        posting = []
        for courier in couriers { courier.post() }
    }

    private func handle(_ command: Command, _ multi: UnsafeMutableRawPointer) {
        switch command {
        case let .start(transfer):
            attach(transfer, multi)
        case let .stop(transfer):
            if let easy = transfer.easy, running.removeValue(forKey: easy) != nil {
                _ = ferry_curl_multi_remove_handle(multi, easy)
            }
            forget(transfer)
            transfer.stopped()
        case let .unpause(transfer):
            if let easy = transfer.easy, running[easy] != nil {
                _ = ferry_curl_easy_pause(easy, FERRY_CURLPAUSE_CONT)
            }
        case let .startSFTP(transfer):
            inFlightBound.store(Self.inFlightBound(running: running.count + sftpRunning.count + 1), ordering: .relaxed)
            sftpRunning[ObjectIdentifier(transfer)] = transfer
            transfer.start(sftpConnections, now: monotonicSeconds())
            if !transfer.over, transfer.limits.map(Self.anythingLimited) ?? false { shareLimits() }
        case let .stopSFTP(transfer):
            if sftpRunning.removeValue(forKey: ObjectIdentifier(transfer)) != nil { forget(transfer) }
            transfer.stopped()
        case let .wakeSFTP(transfer):
            if sftpRunning[ObjectIdentifier(transfer)] != nil { transfer.wake() }
        case let .answeredSFTP(transfer):
            if sftpRunning[ObjectIdentifier(transfer)] != nil { transfer.answerHandedOver() }
        }
    }

    /// A round of the sftp connections' I/O, then each sftp transfer's idle check and what it holds handed on.
    private func serviceSFTP() {
        guard !(sftpConnections.isEmpty && sftpRunning.isEmpty) else { return }
        let now = monotonicSeconds()
        sftpConnections.service(now: now)
        for transfer in sftpRunning.values {
            transfer.checkIdle(now: now)
            transfer.flush()
        }
    }

    /// An sftp transfer ended (transport thread): it is not paced or woken any more.
    func sftpEnded(_ transfer: SFTPTransfer) {
        if sftpRunning.removeValue(forKey: ObjectIdentifier(transfer)) != nil { forget(transfer) }
    }

    // MARK: Bandwidth limits

    /// A limit changed somewhere: shares are worked out again on the next round.
    func limitsChanged() {
        sharesChanged.store(true, ordering: .releasing)
        if let multi { _ = ferry_curl_multi_wakeup(multi) }
    }

    /// Called from a transfer's callback on this thread.
    func waitForRate(_ transfer: any PacedTransfer) {
        if !rateWaiting.contains(where: { $0 === transfer }) { rateWaiting.append(transfer) }
    }

    private func forget(_ transfer: any PacedTransfer) {
        inFlightBound.store(Self.inFlightBound(running: running.count + sftpRunning.count), ordering: .relaxed)
        rateWaiting.removeAll { $0 === transfer }
        if transfer.limits.map(Self.anythingLimited) ?? false { sharesChanged.store(true, ordering: .releasing) }
    }

    /// Whether the limits a transfer answers to limit anything now. When they do not, a transfer that comes or
    /// goes changes no one's share: every transfer runs free (the last pass, at the change that lifted the last
    /// limit, set them so), and a new one starts free. (A pass at each of them cost 64 HTTP/2 streams 0.8 % of
    /// their CPU: grouping every running transfer to find nothing limited.)
    private static func anythingLimited(_ membership: LimitMembership) -> Bool {
        !membership.limits.current.limitNothing
    }

    private func resumeRateWaiters(_ multi: UnsafeMutableRawPointer) {
        guard !rateWaiting.isEmpty else { return }
        let now = monotonicSeconds()
        let due = rateWaiting.filter { ($0.pacer.resumeAt ?? 0) <= now }
        guard !due.isEmpty else { return }
        rateWaiting.removeAll { t in due.contains { $0 === t } }
        for transfer in due {
            transfer.rateWaitEnded()
            if let sftp = transfer as? SFTPTransfer {
                if sftpRunning[ObjectIdentifier(sftp)] != nil { sftp.wake() }
                continue
            }
            // The write callback may run inside this call (libcurl hands over what it holds) and pause again.
            if let curl = transfer as? CurlTransfer, let easy = curl.easy, running[easy] != nil {
                _ = ferry_curl_easy_pause(easy, FERRY_CURLPAUSE_CONT)
            }
        }
    }

    /// Each limited transfer's rate: an engine's global rate for a direction is shared between the items
    /// moving that way (max-min fair, LimitShares: what a slow item cannot use goes to the others), an item's
    /// rate (its own limit, or its share when lower) equally between its ranges. Worked out again when a
    /// transfer comes or goes, a limit changes, and once a second from what each item took in.
    private func shareLimits() {
        let now = monotonicSeconds()
        // Once a second each transfer's intake is measured; a pass for a transfer that came or went or a
        // changed limit uses the last measurement (a few milliseconds say nothing of what a transfer can use).
        if now - lastShareAt >= 1 {
            for transfer in paced where transfer.limits != nil { transfer.measureIntake(over: now - lastShareAt) }
            lastShareAt = now
        }
        // Those waiting for their rate wait for the new one (resumeRateWaiters lets them go when it allows).
        defer { for transfer in rateWaiting { transfer.rateChanged(now: now) } }
        // An HTTP/2 stream that a limit now holds back leaves for a connection of its own (endedForLimit).
        defer { endStreamsUnderLimits() }
        var groups: [ObjectIdentifier: [any PacedTransfer]] = [:]
        for transfer in paced {
            guard let limits = transfer.limits else { continue }
            groups[ObjectIdentifier(limits.limits), default: []].append(transfer)
        }
        for (group, transfers) in groups {
            guard let limits = transfers.first?.limits?.limits else { continue }
            let rates = limits.current
            if rates.limitNothing {
                // Nothing limited (the usual case, and a pass at every transfer that comes or goes): each runs
                // free, with no shares to work out (64 HTTP/2 streams spent 2 % of their CPU working them out).
                for member in transfers {
                    member.setRate(nil, now: now)
                    member.share(nil)
                    member.shareItem(nil)
                    member.shareBatch(nil)
                }
                for direction in [Direction.download, .upload] { sharedBuckets[SharedBucketKey(limits: group, direction: direction)] = nil }
                itemBuckets = itemBuckets.filter { $0.key.limits != group }
                batchBuckets = batchBuckets.filter { $0.key.limits != group }
                continue
            }
            for direction in [Direction.download, .upload] {
                let moving = transfers.filter { $0.limits?.direction == direction }
                let global = (direction == .download ? rates.download : rates.upload).map(Double.init)
                let shared = Self.bucket(&sharedBuckets, SharedBucketKey(limits: group, direction: direction), of: limits, rate: global, now: now)
                for member in moving { member.share(shared) }
                let memberRates = LimitShares.rates(global: global, own: rates.items,
                                                    members: moving.map { LimitShares.Member(item: $0.limits!.item, intake: $0.pacer.intake) })
                for (member, rate) in zip(moving, memberRates) { member.setRate(rate, now: now) }
                for member in moving {
                    let item = member.limits!.item
                    member.shareItem(Self.bucket(&itemBuckets, ItemBucketKey(limits: group, item: item, direction: direction), of: limits,
                                                 rate: rates.items[item].map(Double.init), now: now))
                    let batch = member.limits!.batch(in: rates)
                    member.shareBatch(batch.flatMap { batch in
                        Self.bucket(&batchBuckets, ItemBucketKey(limits: group, item: batch, direction: direction), of: limits,
                                    rate: rates.batches[batch].map(Double.init), now: now)
                    })
                }
            }
        }
        pruneBuckets(now: now)
    }

    /// Drops the buckets of items and batches that no transfer takes from and that are full again (a new one
    /// would be the same), or whose limit is gone.
    private func pruneBuckets(now: TimeInterval) {
        guard !itemBuckets.isEmpty || !batchBuckets.isEmpty else { return }
        var moving: Set<ItemBucketKey> = [], movingBatches: Set<ItemBucketKey> = []
        for transfer in paced {
            guard let limits = transfer.limits else { continue }
            moving.insert(ItemBucketKey(limits: ObjectIdentifier(limits.limits), item: limits.item, direction: limits.direction))
            if let batch = limits.batch(in: limits.limits.current) {
                movingBatches.insert(ItemBucketKey(limits: ObjectIdentifier(limits.limits), item: batch, direction: limits.direction))
            }
        }
        itemBuckets = itemBuckets.filter { key, value in
            guard value.limits.current.items[key.item] != nil else { return false }
            return moving.contains(key) || !value.bucket.bucket.isFull(now)
        }
        batchBuckets = batchBuckets.filter { key, value in
            guard value.limits.current.batches[key.item] != nil else { return false }
            return movingBatches.contains(key) || !value.bucket.bucket.isFull(now)
        }
    }

    /// Ends the downloads received as HTTP/2 streams that a limit now holds back (transport thread); an upload
    /// is held back at its own reads, and a body may not be sendable again.
    private func endStreamsUnderLimits() {
        guard let multi else { return }
        let limited = running.filter { $0.value.receivesAsStream && ($0.value.limits?.limited ?? false) }
        for (easy, transfer) in limited {
            running.removeValue(forKey: easy)
            _ = ferry_curl_multi_remove_handle(multi, easy)
            forget(transfer)
            transfer.endedForLimit()
        }
    }

    /// The bucket of a rate kept in `table` under `key` (an engine's rate for a direction, an item's own rate),
    /// made the first time (full: a quarter second's burst), kept while transfers come and go, at the rate asked
    /// for; none, and the one there was dropped, without a rate. Kept with the limits it belongs to, so that no
    /// other limits made later at the same address take a bucket, and its debt, that is not theirs.
    private static func bucket<Key: Hashable>(_ table: inout [Key: (limits: BandwidthLimits, bucket: SharedBucket)], _ key: Key,
                                              of limits: BandwidthLimits, rate: Double?, now: TimeInterval) -> SharedBucket? {
        guard let rate else {
            table[key] = nil
            return nil
        }
        if let (owner, shared) = table[key], owner === limits {
            if shared.bucket.rate != rate { shared.bucket.setRate(rate, now: now) }
            return shared
        }
        let shared = SharedBucket(rate: rate, now: now)
        table[key] = (limits, shared)
        return shared
    }

    /// Makes the transfer's next easy handle and adds it, or lets it fail at once (bad URL, body unreadable).
    private func attach(_ transfer: CurlTransfer, _ multi: UnsafeMutableRawPointer) {
        // Worked out before the handle is made: its read buffer follows from it.
        inFlightBound.store(Self.inFlightBound(running: running.count + sftpRunning.count + 1), ordering: .relaxed)
        guard let easy = transfer.makeEasyHandle() else {
            inFlightBound.store(Self.inFlightBound(running: running.count + sftpRunning.count), ordering: .relaxed)
            return
        }
        if ferry_curl_multi_add_handle(multi, easy) == 0 {
            running[easy] = transfer
            if transfer.limits.map(Self.anythingLimited) ?? false { shareLimits() }
        } else {
            inFlightBound.store(Self.inFlightBound(running: running.count + sftpRunning.count), ordering: .relaxed)
            transfer.failToStart("libcurl refused the transfer")
        }
    }
}

/// A transfer the transport paces under the engine's limits (CurlTransfer on libcurl, SFTPTransfer over OpenSSH).
protocol PacedTransfer: AnyObject {
    var limits: LimitMembership? { get }
    var pacer: RatePacer { get }
    func measureIntake(over interval: TimeInterval)
    func share(_ shared: SharedBucket?)
    func shareItem(_ bucket: SharedBucket?)
    func shareBatch(_ bucket: SharedBucket?)
    func setRate(_ rate: Double?, now: TimeInterval)
    func rateChanged(now: TimeInterval)
    func rateWaitEnded()
}

extension CurlTransfer: PacedTransfer {}
