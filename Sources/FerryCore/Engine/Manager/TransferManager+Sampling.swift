import Foundation

/// Rates and checkpoints, only while something runs: every 0.2 s the rates, once a second the buffered
/// bytes to disk and their count to the store.
extension TransferManager {
    private static let samplePeriod: Double = 0.2
    static let rateHistoryLength = 60

    func startSampler() -> DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: timerQueue)
        timer.schedule(deadline: .now() + Self.samplePeriod, repeating: Self.samplePeriod, leeway: .milliseconds(20))
        timer.setEventHandler { [weak self] in self?.sample() }
        timer.resume()
        return timer
    }

    private func sample() {
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        let due = core.withLock { core -> (checkpoints: [(TransferID, Int64)], runs: [any TaskRun])? in
            var anyRunning = false
            var moved = false
            for transfer in core.queue where transfer.state == .running && transfer.busy {
                anyRunning = true
                let done = transfer.currentBytes
                if done != transfer.bytesDone { moved = true }
                transfer.bytesDone = done
                transfer.rate.add(totalBytes: done, at: now)
                if now - transfer.lastHistorySample >= 1 {
                    transfer.lastHistorySample = now
                    transfer.rateHistory.append(transfer.rate.bytesPerSecond ?? 0)
                    if transfer.rateHistory.count > Self.rateHistoryLength { transfer.rateHistory.removeFirst() }
                }
            }
            if moved { core.version &+= 1 }
            if !anyRunning, !core.items.values.contains(where: { $0.finishing }) {
                core.sampler?.cancel()
                core.sampler = nil
            }
            guard now - core.lastCheckpoint >= 1 else { return nil }
            core.lastCheckpoint = now
            let busy = core.items.values.filter(\.busy)
            // Segmented downloads store which ranges are done (what was flushed before now: a record never
            // claims more than the file holds), queued under the lock like every record, so that it cannot
            // overtake a newer one; the others only a byte count.
            let records = busy.filter { $0.segments != nil }.map { $0.record() }
            if !records.isEmpty { storeWriter.enqueue(records, order: nil) }
            let checkpoints = busy.filter { $0.segments == nil }.map { ($0.id, $0.currentBytes) }
            return (checkpoints, busy.flatMap(\.runs))
        }
        guard let due else { return }
        due.runs.forEach { $0.flushToDisk() }
        storeWriter.checkpoint(due.checkpoints)
    }
}
