/** Kernel lab page (placeholder while the lab registry lands). */
export function startLab(): void {}
