import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Carrying out what transfers ask for: attempts (a RangeRun or an UploadRun and its session task),
/// stops, timers, the `.part` file's preparation, and the last steps of a download.
extension TransferManager {
    /// The scheduler gave `id` a slot.
    func launch(_ id: TransferID, _ core: inout Core) -> [Effect] {
        guard let transfer = loaded(id, &core) else { return [] }
        var partSize: Int64?
        if let name = transfer.fileName {
            var st = stat()
            if stat(PartialFile.path(directory: transfer.spec.directory, name: name), &st) == 0 { partSize = Int64(st.st_size) }
        }
        if partSize == nil, let size = Self.finishedBeforeACrash(transfer) {
            return carryOut(transfer.foundFinished(name: transfer.fileName!, size: size), for: transfer, &core)
        }
        return carryOut(transfer.start(partSize: partSize), for: transfer, &core)
    }

    /// A download whose `.part` file is gone while its final file is there, at the size the server gave and
    /// written since its first attempt began: the engine stopped (a crash, kill -9) between the rename and
    /// the store's record of it. Its size, or nil when that is not the case.
    ///
    /// The store may know the item's name (its claim) and not yet its attempts: a small file is claimed,
    /// fetched and renamed between two batches of records. The name was free when it was claimed (a claim
    /// never takes a name that exists), so a file of that name and of exactly the size the server gave is
    /// this item's, attempt or not; without this, `ferry run` after a `kill -9` fetched such files again as
    /// "name (1)" (40 of 1,000 small files, in 14 of 25 tries).
    private static func finishedBeforeACrash(_ transfer: Transfer) -> Int64? {
        guard transfer.spec.direction == .download, let name = transfer.fileName,
              let total = transfer.validators.totalLength else { return nil }
        var st = stat()
        guard stat(transfer.spec.directory + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
              Int64(st.st_size) == total else { return nil }
        if let started = transfer.attempts.first?.startedAt, Double(st.st_mtim.tv_sec) < started.timeIntervalSince1970 - 2 {
            return nil
        }
        return total
    }

    /// Under the lock: attempts are made and attached here, files prepared; what must wait for the lock to be
    /// released (cancelling tasks, timers, the finisher) comes back as closures for `mutate` to run.
    func carryOut(_ effects: [Transfer.Effect], for transfer: Transfer, _ core: inout Core) -> [Effect] {
        core.touch(transfer.id)
        var out: [Effect] = []
        var pending = effects[...]
        let id = transfer.id
        while let effect = pending.popFirst() {
            switch effect {
            case let .startRange(attempt):
                startRange(attempt, of: transfer)
            case let .startUpload(serial):
                if let failure = startUpload(serial, of: transfer) {
                    pending = (transfer.couldNotStart(serial: serial, failure) ?? [])[...]
                }
            case let .stop(serials):
                let tasks = transfer.tasks(of: serials)
                if !tasks.isEmpty { out.append { tasks.forEach { $0.cancel() } } }
            case .truncatePart:
                if let path = partPath(transfer) { _ = truncate(path, 0) }
            case let .preallocate(size):
                if let problem = Self.preallocate(partPath(transfer), size: size, directory: transfer.spec.directory) {
                    pending = transfer.fileProblem(problem)[...]
                    continue
                }
            case let .wake(after, token):
                out.append { [clock] in
                    // A stale timer is harmless: the transfer ignores a token of an earlier start.
                    clock.after(after) { [weak self] in self?.event(id) { $0.retryDue(token: token) } }
                }
            case let .wakeRange(index, after, token):
                out.append { [clock] in
                    clock.after(after) { [weak self] in self?.event(id) { $0.rangeRetryDue(index: index, token: token) } }
                }
            case let .discardUpload(upload):
                out += discardOnServer(upload, of: transfer.spec)
            case let .finish(handover, token):
                let spec = transfer.spec
                let file = handover ?? segmentsHandover(transfer)
                let modified = transfer.validators.lastModified.flatMap(HTTPDate.parse)
                let finishing = FileFinisher.Finishing(handover: file, spec: spec, modified: modified) { outcome in
                    self.event(id) { $0.finished(token: token, outcome) }
                }
                out.append { [finishQueue, publishing] in
                    // Straight to the publish queue (one hop for the files that are ready together), unless its
                    // SHA-256 must be checked first.
                    guard spec.sha256 != nil else { return publishing.send([finishing]) }
                    finishQueue.async {
                        if let failure = FileFinisher.verify(finishing) { return finishing.done(.failure(failure)) }
                        publishing.send([finishing])
                    }
                }
            }
        }
        return out
    }

    /// The ranges' file at its full size, its blocks reserved (so a full disk shows now, not halfway through
    /// a range); a filesystem that cannot reserve gets a sparse file. nil, or what went wrong.
    private static func preallocate(_ path: String?, size: Int64, directory: String) -> TransferFailure? {
        guard let path else { return .local(.other, "cannot prepare a file in \(directory): no name") }
        guard truncate(path, 0) == 0 else { return .local("cannot prepare \(path)", errno: errno) }
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return .local("cannot prepare \(path)", errno: errno) }
        defer { close(fd) }
        let reserved = posix_fallocate(fd, 0, off_t(size))
        if reserved == ENOSPC || reserved == EDQUOT {
            _ = ftruncate(fd, 0)
            return .local(.diskFull, DiskSpace.fullMessage(writing: path, needed: size))
        }
        if reserved != 0, ftruncate(fd, off_t(size)) != 0 { return .local("cannot prepare \(path)", errno: errno) }
        return nil
    }

    private func partPath(_ transfer: Transfer) -> String? {
        transfer.fileName.map { PartialFile.path(directory: transfer.spec.directory, name: $0) }
    }

    /// Makes the range's run; its task is made and started on the call queue (SessionTask).
    private func startRange(_ attempt: Transfer.RangeAttempt, of transfer: Transfer) {
        let id = transfer.id
        let serial = attempt.serial
        let start = RangeRun.Start(spec: transfer.spec, fileName: transfer.fileName, rangeStart: attempt.rangeStart,
                                   from: attempt.from, end: attempt.end, knownTotal: attempt.knownTotal,
                                   validators: transfer.validators, bufferSize: configuration.writeBufferSize)
        var accepted: (@Sendable (String, Validators, Bool, Bool) -> Void)?
        var named: (@Sendable (String) -> Void)?
        if attempt.end == nil {
            accepted = { [weak self] name, validators, rangeable, startedOver in
                guard let self else { return }
                self.event(id) {
                    $0.accepted(serial: serial, fileName: name, validators: validators, rangeable: rangeable, startedOver: startedOver)
                }
            }
            // Only the name, at once and under the lock alone: nothing else changes (no slot, no state), and the
            // next record of the item carries it (the store has the claim already).
            named = { [weak self] name in
                self?.core.withLock { core in core.items[id]?.named(serial: serial, fileName: name) }
            }
        }
        // The name a first attempt claims reaches the store before its `.part` file exists, not with the next
        // batch: after a crash a restart finds the `.part` (or the finished file) under its name instead of
        // claiming "name (1)" beside it.
        let claiming: @Sendable (String, Validators) -> Void = { [storeWriter] name, validators in
            storeWriter.recordClaim(id, fileName: name, validators: validators)
        }
        let run = RangeRun(start: start, names: names, clock: clock, claiming: attempt.end == nil ? claiming : nil, named: named,
                           accepted: accepted, finish: report(to: id, serial: serial))
        let request = run.makeRequest(userAgent: configuration.userAgent, timeout: configuration.idleTimeout,
                                      credentials: delegate.credentials(for: transfer.spec))
        attach(run, serial: serial, to: transfer) { [session] in session.dataTask(with: request) }
    }

    /// Makes the upload's run, or says why its body cannot be made.
    private func startUpload(_ serial: Int, of transfer: Transfer) -> TransferFailure? {
        guard let upload = transfer.spec.upload else { return .local(.other, "an upload without a body") }
        let plan: BodyPlan
        do throws(BodyError) {
            plan = try BodyPlan.make(for: upload)
        } catch {
            return .local(error.kind, error.description)
        }
        if let kind = upload.resumable, kind == .tus || configuration.offerResumableUploads,
           case let .file(path, length) = plan.pieces.first, plan.pieces.count == 1 {
            startResumableUpload(serial, of: transfer, kind: kind, plan: plan, path: path, length: length)
            return nil
        }
        if transfer.appendsToServersCopy, case let .file(path, length) = plan.pieces.first, plan.pieces.count == 1 {
            startRemoteAppend(serial, of: transfer, plan: plan, path: path, length: length)
            return nil
        }
        let run = UploadRun(spec: transfer.spec, plan: plan, standardInputPath: configuration.standardInputPath, clock: clock,
                            finish: report(to: transfer.id, serial: serial))
        let request = run.makeRequest(userAgent: configuration.userAgent, timeout: configuration.idleTimeout,
                                      credentials: delegate.credentials(for: transfer.spec))
        attach(run, serial: serial, to: transfer) { [session] in session.uploadTask(withStreamedRequest: request) }
        return nil
    }

    /// A resumable upload's attempt: its requests are tasks of the session one after another, under one handle
    /// (a cancel stops the one under way and every later one); where the upload stands on the server reaches
    /// the item and the store before the attempt goes on.
    private func startResumableUpload(_ serial: Int, of transfer: Transfer, kind: ResumableProtocol, plan: BodyPlan,
                                      path: String, length: Int64) {
        let id = transfer.id
        let handle = SessionTask()
        let limits = limitMembership(transfer)
        let requests = resumableRequests(for: transfer.spec)
        let host = transfer.host
        var chunking = configuration.uploadChunking(for: host)
        if resumableHosts.refusesGrownChunks(host) { chunking = UploadChunking(size: chunking.size, grows: false) }
        let context = ResumableUploadRun.Context(
            spec: transfer.spec, plan: plan, path: path, length: length,
            chunking: chunking,
            refusedGrownChunk: { [resumableHosts] in resumableHosts.refusedGrownChunk(host) },
            speaksDraft: resumableHosts.speaksDraft(host),
            spokeDraft: { [resumableHosts] in resumableHosts.spokeDraft(host) },
            request: { requests.make($0, $1) },
            uploadRequest: UploadRun.request(spec: transfer.spec, plan: plan, userAgent: configuration.userAgent,
                                             timeout: configuration.idleTimeout, credentials: delegate.credentials(for: transfer.spec)),
            issue: issuer(handle, limits: limits),
            changed: { [weak self, storeWriter] upload in
                guard let self, self.event(id, { $0.resumableChanged(serial: serial, upload) }) else { return }
                storeWriter.recordResumable(id, upload)
            },
            finish: report(to: id, serial: serial),
            clock: clock)
        let upload = transfer.resumable?.kind == kind ? transfer.resumable! : ResumableUpload(kind: kind)
        let run = ResumableUploadRun(context: context, upload: upload)
        transfer.attach(serial: serial, run: run, task: handle)
        run.start()
    }

    /// An sftp or ftp upload resumed from what the server has (RemoteAppendRun): its requests one after another under one
    /// handle, as a resumable upload's are.
    private func startRemoteAppend(_ serial: Int, of transfer: Transfer, plan: BodyPlan, path: String, length: Int64) {
        let handle = SessionTask()
        let limits = limitMembership(transfer)
        let context = RemoteAppendRun.Context(
            sentBefore: transfer.sentBefore, plan: plan, path: path, length: length,
            uploadRequest: UploadRun.request(spec: transfer.spec, plan: plan, userAgent: configuration.userAgent,
                                             timeout: configuration.idleTimeout, credentials: delegate.credentials(for: transfer.spec)),
            issue: issuer(handle, limits: limits),
            appending: { [weak self, id = transfer.id] from in _ = self?.event(id) { $0.appending(serial: serial, from: from) } },
            finish: report(to: transfer.id, serial: serial),
            clock: clock)
        let run = RemoteAppendRun(context: context)
        transfer.attach(serial: serial, run: run, task: handle)
        run.start()
    }

    /// How an attempt that is a sequence of requests makes each: a task of the session under `handle` (an upload
    /// task whose body the run makes, `withBody`, else a data task), routed to the run with the item's limits; or,
    /// when the attempt was stopped first, `cancelled`.
    private func issuer<Run: TaskRun>(_ handle: SessionTask, limits: LimitMembership)
        -> @Sendable (Run, URLRequest, Bool, @escaping @Sendable () -> Void) -> Void {
        { [session, delegate] run, request, withBody, cancelled in
            handle.next({ withBody ? session.uploadTask(withStreamedRequest: request) : session.dataTask(with: request) },
                        start: { task in
                            delegate.register(run, for: task, limits: limits)
                            task.resume()
                        }, cancelled: cancelled)
        }
    }

    /// Ends a resumable upload's copy on the server (a DELETE nothing waits for; the server's own expiry
    /// covers one that does not arrive). Nothing when the server made none.
    func discardOnServer(_ upload: ResumableUpload, of spec: TransferSpec) -> [Effect] {
        guard let request = resumableRequests(for: spec).cancellation(upload) else { return [] }
        return [{ [session] in _ = SessionTask.make({ session.dataTask(with: request) }) { $0.resume() } }]
    }

    /// The requests of a resumable upload to its location, with the item's headers and the credentials of
    /// that location's host (a location on another host gets none of the item's).
    func resumableRequests(for spec: TransferSpec) -> ResumableRequests {
        ResumableRequests(spec: spec, userAgent: configuration.userAgent, timeout: configuration.idleTimeout,
                          credentials: delegate.credentials(for: spec))
    }

    /// Where an attempt's report goes: to its transfer, as the end of attempt `serial`.
    private func report(to id: TransferID, serial: Int) -> @Sendable (AttemptReport) -> Void {
        { [weak self] report in
            guard let self else { return }
            self.event(id) { $0.ended(serial: serial, report) }
        }
    }

    private func attach(_ run: any TaskRun, serial: Int, to transfer: Transfer,
                        makeTask: @escaping @Sendable () -> URLSessionTask) {
        let limits = limitMembership(transfer)
        let task = SessionTask.make(makeTask) { [delegate] task in
            delegate.register(run, for: task, limits: limits)
            task.resume()
        }
        transfer.attach(serial: serial, run: run, task: task)
    }

    /// The ranges' preallocated `.part` file, opened for the last steps; nil when it cannot be opened
    /// (the finisher then reports why).
    private func segmentsHandover(_ transfer: Transfer) -> FileHandover? {
        guard let name = transfer.fileName, let path = partPath(transfer),
              let file = try? PartialFile(openingOrCreating: path, bufferSize: 64 * 1024) else { return nil }
        return FileHandover(file: file, fileName: name, total: transfer.validators.totalLength)
    }
}
