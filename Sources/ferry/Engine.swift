import FerryCore

/// The one place the executable builds its engine (the durable store gets wired in here).
func makeTransferManager(
    configuration: EngineConfiguration,
    onEvent: (@Sendable (TransferEvent) -> Void)? = nil
) throws -> TransferManager {
    try TransferManager(configuration: configuration, onEvent: onEvent)
}
